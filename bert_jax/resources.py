"""What the package ships and where it keeps caches: nothing resolves against the current
directory, so an installed wheel runs anywhere and a crafted directory cannot feed a run its
configs or compiled executables.

The bundled data (bert_jax/bundled: the novels, their vocabulary, the fine-food reviews) and the
configs (bert_jax/configs) are package files; a checkout's data/ and configs/ are links to them,
so there is one copy. Caches live in the user cache directory: $BERT_JAX_CACHE, else
$XDG_CACHE_HOME/bert_jax, else ~/.cache/bert_jax, made private (mode 0700).
"""

from __future__ import annotations

import os

from bert_jax.errors import BertJaxError

VERSION = "0.1.0"  # the package's version: pyproject.toml reads it here
PACKAGE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(PACKAGE, "bundled")
CONFIGS = os.path.join(PACKAGE, "configs")
CACHE_VARIABLE = "BERT_JAX_CACHE"
# short names of the pretraining configs, as the command line takes them (`--config tiny`)
CONFIG_ALIASES = {"tiny": "pretrain_tiny", "base": "pretrain_base",
                  "base_phase2": "pretrain_base_phase2"}
# a bundled file's name before it moved into the package: what saved runs hold
_CHECKOUT_PREFIX = "data/"


def bundled(relative: str) -> str:
    """The absolute path of a bundled data file (or glob), e.g. bundled("austen/*.txt")."""
    return os.path.join(BUNDLED, *relative.split("/"))


def portable(value):
    """A bundled path as the checkout names it ("data/austen/*.txt"), whichever copy of the
    package it points into; anything else unchanged. Saved runs compare settings through it,
    so a run resumes after the package moves (a new venv, the wheel instead of the checkout)."""
    if isinstance(value, str) and value.startswith(BUNDLED + os.sep):
        return _CHECKOUT_PREFIX + os.path.relpath(value, BUNDLED).replace(os.sep, "/")
    return value


def config_names() -> list[str]:
    """The bundled configs' names (file stems), sorted."""
    return sorted(name[:-3] for name in os.listdir(CONFIGS)
                  if name.endswith(".py") and not name.startswith("_"))


def config_path(name_or_path: str) -> str:
    """The config file a command line names: an existing file is used as given; otherwise a
    bundled config's file stem (`pretrain_tiny`) or short alias (`tiny`). A name is never
    looked up in the current directory, so a `configs/` there runs only when given as a path."""
    if os.path.isfile(name_or_path):
        return name_or_path
    stem = CONFIG_ALIASES.get(name_or_path, name_or_path)
    if stem in config_names():
        return os.path.join(CONFIGS, f"{stem}.py")
    names = ", ".join(config_names() + sorted(CONFIG_ALIASES))
    raise BertJaxError(f"{name_or_path}: config file not found, and no bundled config has that "
                       f"name (expected a path to a .py file or one of: {names})")


def cache_dir(*parts: str) -> str:
    """A directory in the user cache (made on first use, the cache itself mode 0700)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(xdg):  # the XDG spec: a relative value is ignored
        xdg = os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.abspath(os.environ.get(CACHE_VARIABLE) or os.path.join(xdg, "bert_jax"))
    if not os.path.isdir(root):
        os.makedirs(root, mode=0o700, exist_ok=True)
        os.chmod(root, 0o700)  # makedirs' mode is filtered by the umask
    path = os.path.join(root, *parts)
    os.makedirs(path, exist_ok=True)
    return path
