"""Atomic writes: a reader sees the old directory (or file) or the complete new one, never half."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from bert_jax.errors import BertJaxError


def check_writable_dir(path: str, overwrite: bool) -> None:
    """Refuse before any work is done, so a bad destination never costs a long conversion."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise BertJaxError(f"{path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise BertJaxError(f"{path}: directory exists and is not empty (pass --overwrite to "
                           f"replace it)")


@contextlib.contextmanager
def atomic_directory(path: str, overwrite: bool = False):
    """Yield a temporary sibling directory; on success it replaces `path` in one rename.

    On any exception the temporary directory is removed and `path` is untouched.
    """
    path = os.path.abspath(path)
    check_writable_dir(path, overwrite)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        yield tmp
        old = None
        if os.path.isdir(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
            os.rename(path, os.path.join(old, "x"))
        os.rename(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_output_file(path: str, extensions, source: str = "") -> None:
    """Refuse an output file before any work: a known type, in an existing directory, and not
    the input file `source`."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in extensions:
        raise BertJaxError(f"{path}: unknown output type {ext or '(none)'}; expected "
                           f"{', '.join(extensions)}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BertJaxError(f"{path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise BertJaxError(f"{path}: is a directory")
    if source and os.path.exists(path) and os.path.samefile(path, source):
        raise BertJaxError(f"{path}: --output would overwrite --input")


@contextlib.contextmanager
def atomic_file(path: str):
    """Yield a temporary sibling with the same extension (np.save and pandas go by it); on
    success it replaces `path` in one rename, on any error it is removed."""
    base, ext = os.path.splitext(os.path.abspath(path))
    tmp = os.path.join(os.path.dirname(base), f".{os.path.basename(base)}.tmp-{os.getpid()}{ext}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
