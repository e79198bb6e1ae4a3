"""Flag conventions shared by every command: one spelling, hidden aliases, multi-host flags,
and the library's parameter names translated to the flags that set them."""

from __future__ import annotations

import argparse
import re

from bert_jax.errors import BertJaxError


class Parser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse prints the whole usage first); subcommand
    parsers inherit this class."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_common(parser: argparse.ArgumentParser) -> None:
    """--debug, accepted before or after the subcommand (SUPPRESS: a subcommand without it
    keeps the value the main parser set)."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks and INFO logs")


def add_multihost(parser: argparse.ArgumentParser) -> None:
    """The jax.distributed flags every training command takes (Slurm / TPU pods need none)."""
    group = parser.add_argument_group("multi-host (jax.distributed)")
    group.add_argument("--coordinator-address", default=None,
                       help="host:port of process 0; with --num-processes and --process-id "
                            "(it listens without authentication: a trusted network only)")
    group.add_argument("--num-processes", type=int, default=None)
    group.add_argument("--process-id", type=int, default=None)
    group.add_argument("--initialization-timeout", type=int, default=300,
                       help="seconds to wait for every process to join (default 300)")
    group.add_argument("--heartbeat-timeout", type=int, default=None,
                       help="seconds of silence after which a process counts as lost and "
                            "the others stop (default 20)")


def initialize_distributed(args) -> None:
    """Join a multi-process run; giving only some of the three flags is refused by sharding,
    in one line that as_flags turns back into these flags (so are the run's own lines)."""
    from bert_jax.runtime import sharding
    sharding.initialize_distributed(args.coordinator_address, args.num_processes,
                                    args.process_id, args.initialization_timeout,
                                    args.heartbeat_timeout, prog=f"bert-jax {args.command}",
                                    say=lambda message: as_flags(args.command, message,
                                                                 args.overrides))


def check_multihost(args) -> None:
    """initialize_distributed's refusal of a partial set of the three flags, made before JAX is
    imported (and before the config, which may name the workdir, is read)."""
    given = [v is not None for v in (args.coordinator_address, args.num_processes,
                                     args.process_id)]
    if any(given) and not all(given):
        raise BertJaxError("coordinator_address, num_processes and process_id go together")


def normalize(argv: list[str]) -> list[str]:
    """`--batch_size` → `--batch-size`: the underscore spellings of earlier releases stay
    accepted without appearing in --help (`--config.FIELD` overrides keep theirs)."""
    out = []
    for arg in argv:
        if arg == "--":
            out.extend(argv[len(out):])
            break
        if arg.startswith("--") and not arg.startswith("--config."):
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """(other arguments, ["FIELD=VALUE", …]) from the `--config.FIELD=VALUE` items."""
    rest, overrides = [], []
    for arg in argv:
        if arg.startswith("--config."):
            overrides.append(arg[len("--config."):])
        else:
            rest.append(arg)
    return rest, overrides


OVERRIDABLE = ("pretrain", "prepare", "finetune")  # the commands that take --config.FIELD=VALUE
_MULTIHOST = {"coordinator_address": "--coordinator-address", "num_processes": "--num-processes",
              "process_id": "--process-id", "initialization_timeout": "--initialization-timeout",
              "heartbeat_timeout": "--heartbeat-timeout"}

# library parameter → the flag that sets it, per command: errors name parameters; users see flags
PARAMETER_FLAGS = {
    "pretrain": _MULTIHOST,
    "prepare": {"shard": "--shard", "num_shards": "--num-shards", "workers": "--workers"},
    "finetune": {**_MULTIHOST, "config.init_from": "--init DIR",
                 "config.train_file": "--train FILE", "config.validation_file": "--validation FILE",
                 "config.dataset": "--dataset NAME", "max_seq_length": "--max-seq-length",
                 "doc_stride": "--doc-stride"},
    "glue": {"init_from": "--init", "tasks": "--tasks", "learning_rates": "--learning-rates",
             "seeds": "--seeds", "max_train_examples": "--max-train-examples",
             "max_seq_length": "--max-seq-length", "batch_size": "--batch-size"},
    "predict": {"batch_size": "--batch-size", "max_seq_length": "--max-seq-length",
                "doc_stride": "--doc-stride",
                "output_file": "--output", "input_file": "--input"},
    "embed": {"batch_size": "--batch-size", "max_seq_length": "--max-seq-length",
              "pooling": "--pooling", "output_file": "--output", "input_file": "--input",
              "layers": "--layers"},
    "fill-mask": {"top_k": "--top-k", "batch_size": "--batch-size", "output_file": "--output",
                  "input_file": "--input"},
    "convert": {"overwrite=True": "--overwrite"},
    "parity": {"batch_size": "--batch-size", "seq_len": "--seq-len"},
    "tokenizer": {"min_frequency": "--min-frequency", "files": "--files"},
}


def as_flags(command: str, message: str, overrides=()) -> str:
    """A library message naming parameters ("batch_size: …", "… give config.train_file") as
    the flags that set them for `command`: the one place parameter names become flags.

    A config field set by `--config.FIELD=VALUE` is named so; a `config.FIELD` leading the
    message stays (its subject: a config file may have set it); a plain-word parameter
    ("pooling") is translated only there, where it cannot be prose.
    """
    overridden = {item.partition("=")[0] for item in overrides}
    for field in sorted(overridden, key=len, reverse=True):
        message = re.sub(_anywhere(f"config.{field}"), lambda m: f"--{m[0]}", message)
    if command in OVERRIDABLE:  # "set config.FIELD=VALUE" is advice to pass the flag
        message = re.sub(r"(?<![\w./-])(config\.\w+=)", r"--\1", message)
    for name, flag in PARAMETER_FLAGS.get(command, {}).items():
        prose = re.fullmatch(r"[a-z]+", name) is not None
        subject = not name.startswith("config.")
        message = re.sub(_anywhere(name), lambda m: flag if (
            (subject if m.start() == 0 else not prose)) else m[0], message)
    return message


def _anywhere(name: str) -> str:
    """`name` as a whole token: not part of a longer name, a path or a flag."""
    return r"(?<![\w./-])" + re.escape(name) + r"(?![\w])"
