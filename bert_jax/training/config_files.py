"""Run config files: Python files with one `get_config()`, plus `FIELD=VALUE` overrides.

Shared by every run config dataclass (PretrainConfig, FinetuneConfig): running the file, parsing
overrides to the field's type (an unknown field is refused with the close matches listed), and
the range checks, each refusal naming its field.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import math
import os
import re
import sys
import traceback
import typing

from bert_jax import resources
from bert_jax.errors import BertJaxError

NONFINITE_POLICIES = ("stop", "skip")
# config class name → {old field name: new}: a config file that still passes an old name is
# told the new one (each class's RENAMED, registered by its module)
RENAMED_FIELDS: dict[str, dict] = {}


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


def run_config_file(path: str):
    """The object `get_config()` of the Python file at `path` returns (any config dataclass);
    a name that is no file is a bundled config's (resources.config_path: `tiny`,
    `finetune_fine_foods`)."""
    path = resources.config_path(path)
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
    except SyntaxError as e:  # `from e`: a debug run shows the original error
        raise BertJaxError(f"{e.filename or path}:{e.lineno}: invalid Python ({e.msg})") from e
    except Exception as e:  # the config's own code failed: point at its line
        lines = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(
            "<") and os.path.dirname(os.path.abspath(f.filename)) == directory]
        where = f"{lines[-1].filename}:{lines[-1].lineno}" if lines else path
        message = str(e).splitlines()[0] if str(e) else ""
        raise BertJaxError(f"{where}: {type(e).__name__}: {message}{_renamed_hint(message)}"
                           ) from e
    finally:
        sys.path.remove(directory)


def _renamed_hint(message: str) -> str:
    """The hint "renamed: did you mean NEW?" for a config file that passed a field under its old
    name ("" for any other error)."""
    m = re.search(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'", message)
    new = RENAMED_FIELDS.get(m[1], {}).get(m[2]) if m else None
    return f"; renamed: did you mean {new}?" if new else ""


def apply_overrides(cfg, overrides: typing.Sequence[str]):
    """["steps=10", "dtype=bfloat16"] → cfg.replace(...), each value parsed to the field type."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    hints = typing.get_type_hints(type(cfg))
    renamed = getattr(cfg, "RENAMED", {})
    changes = {}
    for item in overrides:
        name, sep, text = item.partition("=")
        if not sep:
            raise BertJaxError(f"config.{item}: expected config.{item}=VALUE")
        if name in renamed:  # an old spelling: its new name, not a quiet alias
            raise BertJaxError(f"config.{name}: renamed; did you mean config.{renamed[name]}?")
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise BertJaxError(f"config.{name}: unknown config field{hint}")
        changes[name] = _parse(name, text, hints[name])
    return dataclasses.replace(cfg, **changes)


def migrate(fields: dict, renamed: dict) -> dict:
    """A saved config's fields under today's names: each old name in `renamed` (old → new)
    read as its new one, so a run saved before a rename resumes (and is compared field by
    field) as if saved today."""
    out = {k: v for k, v in fields.items() if k not in renamed}
    for old, new in renamed.items():
        if old in fields and new not in out:
            out[new] = fields[old]
    return out


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
        raise BertJaxError(f"config.{name}: expected {kind.__name__}, got {text!r}") from None
