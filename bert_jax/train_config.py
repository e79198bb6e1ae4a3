"""Run configs: Python files with one `get_config()`, plus `--config.FIELD=VALUE` overrides.

A config file returns a PretrainConfig; variants import a base file from the same directory and
`.replace(...)` fields. Overrides are parsed to the field's type; an unknown field is refused
with the close matches listed.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import math
import os
import sys
import traceback
import typing
from typing import Optional

from bert_jax.errors import BertJaxError


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Everything one pretraining run needs; saved as JSON beside its checkpoints."""

    # model and initialisation
    model: str = "tiny"  # a BertConfig preset (tiny … large) or a path to a config.json
    init_from: str = ""  # model dir, HF dir or pretraining workdir to start from ("" = scratch)
    dtype: str = "float32"  # computation dtype: float32 | bfloat16 (params stay float32)
    remat: bool = False  # recompute each layer in the backward pass: less memory, ~1/3 more time
    dropout: Optional[float] = None  # hidden and attention dropout; None keeps the model's (0.1)
    # data
    train_files: str = "data/austen/*.txt"  # glob of UTF-8 text files, one document per file
    documents: str = "file"  # "file": one document a file; "blank_line": split at blank lines
    vocab: str = ""  # vocab.txt / tokenizer.json; "" trains one into WORKDIR/vocab
    vocab_size: int = 8192  # size of the vocabulary trained when `vocab` is ""
    lowercase: bool = True  # uncased model (lowercase + strip accents) for a trained vocab
    max_seq_length: int = 128  # tokens per example, [CLS] and [SEP]s included
    max_predictions_per_seq: int = 20  # masked positions per example (P)
    masked_lm_prob: float = 0.15  # fraction of real tokens chosen for MLM
    whole_word_masking: bool = False  # choose all pieces of a word together
    short_seq_prob: float = 0.1  # chance of a shorter target length, as the original
    dupe_factor: int = 1  # passes over the corpus with different pairs
    eval_fraction: float = 0.02  # share of examples held out for evaluation
    data_seed: int = 0  # seeds pair creation, the held-out split and the batch order
    # optimisation
    batch_size: int = 32  # global batch size (all devices, all processes)
    grad_accum_steps: int = 1  # micro-batches per step; each is batch_size / grad_accum_steps
    steps: int = 1000  # optimiser updates
    learning_rate: float = 1e-4  # peak learning rate
    warmup_steps: int = 100  # linear warmup, then linear decay to 0 at `steps`
    weight_decay: float = 0.01  # decoupled, on ≥2-D params only (not biases, not LayerNorm)
    optimizer: str = "adamw"  # adamw | lamb
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # global-norm clipping
    on_nonfinite: str = "stop"  # a NaN/Inf loss or gradient skips its update, then: stop | skip
    seed: int = 0  # seeds init, masking and dropout (fold_in(key, step))
    # bookkeeping
    log_every: int = 50  # steps between metric logs
    eval_every: int = 500  # steps between held-out evaluations (0 = only at the end)
    eval_batches: int = 20  # held-out batches per evaluation (0 = all)
    checkpoint_every: int = 500  # steps between checkpoints
    keep_checkpoints: int = 3  # checkpoints kept on disk

    def replace(self, **changes) -> "PretrainConfig":
        return dataclasses.replace(self, **changes)


_POSITIVE = ("vocab_size", "max_seq_length", "max_predictions_per_seq", "dupe_factor",
             "batch_size", "grad_accum_steps", "steps", "log_every", "checkpoint_every",
             "keep_checkpoints")
_NON_NEGATIVE = ("warmup_steps", "data_seed", "seed", "eval_every", "eval_batches")
NONFINITE_POLICIES = ("stop", "skip")
_CHOICES = {"dtype": ("float32", "bfloat16"), "optimizer": ("adamw", "lamb"),
            "documents": ("file", "blank_line"), "on_nonfinite": NONFINITE_POLICIES}


def check_fields(cfg, *, at_least_one=(), non_negative=(), choices=None, fractions=(),
                 positive=()) -> None:
    """The range checks every run config shares, each refusal naming its field."""
    check_types(cfg)
    value = lambda name: getattr(cfg, name)  # noqa: E731
    for name in at_least_one:
        if value(name) < 1:
            raise BertJaxError(f"config.{name}: expected an integer ≥ 1, got {value(name)}")
    for name in non_negative:
        if value(name) < 0:
            raise BertJaxError(f"config.{name}: expected an integer ≥ 0, got {value(name)}")
    for name, allowed in (choices or {}).items():
        if value(name) not in allowed:
            raise BertJaxError(f"config.{name}: expected one of {', '.join(allowed)}, got "
                               f"{value(name)!r}")
    for name in fractions:
        if not 0.0 <= value(name) < 1.0:
            raise BertJaxError(f"config.{name}: expected a value in [0, 1), got {value(name)}")
    for name in positive:
        if not 0 < value(name) < math.inf:  # NaN fails this too
            raise BertJaxError(f"config.{name}: expected a positive number, got {value(name)}")


def check_types(cfg) -> None:
    """Every field holds its annotated type: a config file can set anything, and a string
    where a number belongs would otherwise fail later as a TypeError far from its cause."""
    for name, kind in typing.get_type_hints(type(cfg)).items():
        value = getattr(cfg, name)
        if typing.get_origin(kind) is typing.Union:  # Optional[X]: None or an X
            if value is None:
                continue
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        if not isinstance(kind, type):
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number if kind is float else isinstance(value, kind) and
                (kind is bool or not isinstance(value, bool))):
            raise BertJaxError(f"config.{name}: expected {kind.__name__}, got {value!r}")


def validate(cfg: PretrainConfig) -> PretrainConfig:
    """Refuse impossible values, naming the field."""
    check_fields(cfg, at_least_one=_POSITIVE, non_negative=_NON_NEGATIVE, choices=_CHOICES,
                 fractions=("masked_lm_prob", "short_seq_prob", "eval_fraction")
                 + (("dropout",) if cfg.dropout is not None else ()),
                 positive=("learning_rate", "adam_eps", "max_grad_norm"))
    if cfg.warmup_steps > cfg.steps:
        raise BertJaxError(f"config.warmup_steps: {cfg.warmup_steps} is more than config.steps "
                           f"({cfg.steps})")
    if cfg.batch_size % cfg.grad_accum_steps:
        raise BertJaxError(f"config.batch_size: {cfg.batch_size} does not split into "
                           f"{cfg.grad_accum_steps} micro-batches (config.grad_accum_steps)")
    return cfg


def load_config(path: str, overrides: typing.Sequence[str] = ()) -> PretrainConfig:
    """Run `get_config()` of the Python file at `path`, then apply `FIELD=VALUE` overrides."""
    cfg = run_config_file(path)
    if not isinstance(cfg, PretrainConfig):
        raise BertJaxError(f"{path}: get_config() returns a {type(cfg).__name__}, not a "
                           f"PretrainConfig")
    return validate(apply_overrides(cfg, overrides))


def run_config_file(path: str):
    """The object `get_config()` of the Python file at `path` returns (any config dataclass)."""
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: config file not found")
    if not path.endswith(".py"):
        raise BertJaxError(f"{path}: expected a Python file (.py) defining get_config()")
    directory = os.path.dirname(os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(
        f"_bert_jax_config_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, directory)  # so a variant can `import` its base config beside it
    try:
        spec.loader.exec_module(module)
        if not hasattr(module, "get_config"):
            raise BertJaxError(f"{path}: defines no get_config()")
        return module.get_config()
    except BertJaxError:
        raise
    except SyntaxError as e:  # `from e`: --debug shows the original error
        raise BertJaxError(f"{e.filename or path}:{e.lineno}: invalid Python ({e.msg})") from e
    except Exception as e:  # the config's own code failed: point at its line
        lines = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(
            "<") and os.path.dirname(os.path.abspath(f.filename)) == directory]
        where = f"{lines[-1].filename}:{lines[-1].lineno}" if lines else path
        message = str(e).splitlines()[0] if str(e) else ""
        raise BertJaxError(f"{where}: {type(e).__name__}: {message}") from e
    finally:
        sys.path.remove(directory)


def apply_overrides(cfg, overrides: typing.Sequence[str]):
    """["steps=10", "dtype=bfloat16"] → cfg.replace(...), each value parsed to the field type."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    hints = typing.get_type_hints(type(cfg))
    changes = {}
    for item in overrides:
        name, sep, text = item.partition("=")
        if not sep:
            raise BertJaxError(f"--config.{item}: expected --config.FIELD=VALUE")
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise BertJaxError(f"--config.{name}: unknown config field{hint}")
        changes[name] = _parse(name, text, hints[name])
    return dataclasses.replace(cfg, **changes)


def _parse(name: str, text: str, kind):
    if typing.get_origin(kind) is typing.Union:  # Optional[X]: "none" or an X
        if text.lower() == "none":
            return None
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    try:
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        return kind(text)
    except ValueError:
        raise BertJaxError(f"--config.{name}: expected {kind.__name__}, got {text!r}") from None


def split_overrides(argv: typing.Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate `--config.FIELD=VALUE` items from the other arguments."""
    rest, overrides = [], []
    for arg in argv:
        if arg.startswith("--config."):
            overrides.append(arg[len("--config."):])
        else:
            rest.append(arg)
    return rest, overrides
