"""Atomic writes: a reader sees the old directory (or file) or the complete new one, never half."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import os
import shutil
import sys
import tempfile

from bert_jax.errors import BertJaxError

log = logging.getLogger(__name__)
_AT_FDCWD = -100  # <fcntl.h>: paths relative to the working directory
_RENAME_EXCHANGE = 2  # <linux/fs.h>: swap the two paths in one step
_UNSUPPORTED = (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)  # old kernel / libc / filesystem


def check_writable_dir(path: str, overwrite: bool) -> None:
    """Refuse before any work is done, so a bad destination never costs a long conversion."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise BertJaxError(f"{path}: exists and is not a directory")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise BertJaxError(f"{path}: directory exists and is not empty (pass overwrite=True "
                           f"to replace it)")


@contextlib.contextmanager
def atomic_directory(path: str, overwrite: bool = False):
    """Yield a temporary sibling directory; on success it takes the place of `path`.

    A directory already at `path` stays readable until the new one is in place (one
    renameat2 exchange on Linux). On any exception the temporary directory is removed and
    `path` is untouched.
    """
    path = os.path.abspath(path)
    check_writable_dir(path, overwrite)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        yield tmp
        if not os.path.isdir(path):
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            _remove(tmp)  # now the previous directory
        else:
            _replace_in_two_renames(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _exchange(a: str, b: str) -> bool:
    """Swap two paths in one step (renameat2 RENAME_EXCHANGE): no reader sees neither. False
    where the platform, libc, kernel or filesystem has no such call."""
    call = _renameat2()
    if call is None:
        log.debug("no renameat2 on %s: replacing %s in two renames", sys.platform, b)
        return False
    if call(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        log.debug("renameat2 exchange unsupported (%s): replacing %s in two renames",
                  errno.errorcode.get(code, code), b)
        return False
    raise OSError(code, os.strerror(code), a, None, b)


def _renameat2():
    """libc's renameat2 (glibc ≥ 2.28, Linux only), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def _replace_in_two_renames(tmp: str, path: str) -> None:
    """The portable fallback: between the two renames no directory is at `path`."""
    parent, name = os.path.split(path)
    old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
    os.rename(path, os.path.join(old, "x"))
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(os.path.join(old, "x"), path)  # put the previous directory back
        os.rmdir(old)
        raise
    _remove(old)


def _remove(path: str) -> None:
    """Best-effort removal of a directory, or of a symlink that stood at its place."""
    if os.path.islink(path):
        os.unlink(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def check_output_file(output_file: str, extensions, input_file: str = "") -> None:
    """Refuse an output file before any work: a known type, in an existing directory, and not
    the input file."""
    ext = os.path.splitext(output_file)[1].lower()
    if ext not in extensions:
        raise BertJaxError(f"{output_file}: unknown output type {ext or '(none)'}; expected "
                           f"{', '.join(extensions)}")
    parent = os.path.dirname(os.path.abspath(output_file))
    if not os.path.isdir(parent):
        raise BertJaxError(f"{output_file}: directory {parent} does not exist")
    if os.path.isdir(output_file):
        raise BertJaxError(f"{output_file}: is a directory")
    if input_file and os.path.exists(output_file) and os.path.samefile(output_file, input_file):
        raise BertJaxError(f"{output_file}: output_file would overwrite input_file")


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


def write_json(path: str, value) -> None:
    """`value` as indented JSON, replacing `path` in one rename: a reader (or a resumed run)
    never sees half a file."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
            f.write("\n")
