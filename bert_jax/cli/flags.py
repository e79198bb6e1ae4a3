"""Flag conventions shared by every command: one spelling, hidden aliases, multi-host flags,
and the library's parameter names translated to the flags that set them."""

from __future__ import annotations

import argparse

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
                       help="host:port of process 0; with --num-processes and --process-id")
    group.add_argument("--num-processes", type=int, default=None)
    group.add_argument("--process-id", type=int, default=None)
    group.add_argument("--initialization-timeout", type=int, default=300,
                       help="seconds to wait for the other processes")


def initialize_distributed(args) -> None:
    from bert_jax.training import sharding
    given = [args.coordinator_address is not None, args.num_processes is not None,
             args.process_id is not None]
    if any(given) and not all(given):
        raise BertJaxError("--coordinator-address, --num-processes and --process-id go together")
    sharding.initialize_distributed(args.coordinator_address, args.num_processes,
                                    args.process_id, args.initialization_timeout)


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


# library parameter → the flag that sets it, per command: errors name parameters; users see flags
PARAMETER_FLAGS = {
    "predict": {"batch_size": "--batch-size", "max_length": "--max-seq-length"},
    "embed": {"batch_size": "--batch-size", "max_length": "--max-seq-length",
              "pooling": "--pooling", "layers": "--layers"},
    "fill-mask": {"top_k": "--top-k"},
    "parity": {"batch_size": "--batch-size", "seq_len": "--seq-len"},
    "tokenizer": {"vocab_size": "--vocab-size", "min_frequency": "--min-frequency",
                  "files": "--files"},
    "finetune": {"config.init": "--init", "config.train_file": "--train",
                 "config.validation_file": "--validation"},
}


def as_flags(command: str, message: str) -> str:
    """A library error "batch_size: …" as "--batch-size: …" for the command that set it."""
    for parameter, flag in PARAMETER_FLAGS.get(command, {}).items():
        if message.startswith(parameter + ":"):
            return flag + message[len(parameter):]
    return message
