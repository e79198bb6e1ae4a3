"""Atomic writes: a reader sees the old directory (or file) or the complete new one, never half."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import os
import re
import shutil
import stat
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
    """Yield a temporary sibling directory; on success it takes the place of `path`, durably
    (every file in it and the parent directory synced) and readable as the umask allows.

    A directory already at `path` stays readable until the new one is in place (one
    renameat2 exchange on Linux). On any exception the temporary directory is removed and
    `path` is untouched; a write that failed for want of space (or quota, or an I/O error),
    however the writer (safetensors, orbax) reported it, is one line naming `path`.
    """
    path = os.path.abspath(path)
    check_writable_dir(path, overwrite)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        with _write_errors_as_one_line(path):
            yield tmp
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would hide an export from others
            _sync_tree(tmp)
        if not os.path.isdir(path):
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            _remove(tmp)  # now the previous directory
        else:
            _replace_in_two_renames(tmp, path)
        _sync(parent)
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
    success it replaces `path` in one rename, durably (file and directory synced), on any error
    it is removed.

    The temporary name is unpredictable and made with O_EXCL (mkstemp), so a symlink planted
    in a shared directory is never followed; it is checked to be the same file before the
    rename. The file gets the mode a plain `open` would (0666 less the umask).
    """
    parent, name = os.path.split(os.path.abspath(path))
    base, ext = os.path.splitext(name)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.tmp-", suffix=ext, dir=parent)
    try:
        made = os.fstat(fd)
        os.fchmod(fd, 0o666 & ~_umask())
        os.close(fd)
        yield tmp
        now = os.lstat(tmp)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (made.st_dev,
                                                                         made.st_ino):
            raise BertJaxError(f"{tmp}: replaced by another file while being written")
        _sync(tmp)
        os.replace(tmp, path)
        _sync(parent)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def write_json(path: str, value) -> None:
    """`value` as indented JSON, replacing `path` in one rename: a reader (or a resumed run)
    never sees half a file."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
            f.write("\n")


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for a moment, for
    every thread): /proc/self/status on Linux; 0o022 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def _sync(path: str) -> None:
    """fsync a file or directory: a rename is durable only once its data and the directory
    entry are on disk."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(directory: str) -> None:
    for folder, _, files in os.walk(directory):
        for name in files:
            _sync(os.path.join(folder, name))
        _sync(folder)


@contextlib.contextmanager
def _write_errors_as_one_line(path: str):
    """A writer's error that carries an errno (safetensors' Rust "Os { code: 28 …", orbax's
    tensorstore "os_error_code=28", or an OSError anywhere in its chain) as one line."""
    try:
        yield
    except (BertJaxError, OSError):  # an OSError is one line already (cli/main.py)
        raise
    except Exception as e:  # noqa: BLE001 - only those with an errno are converted
        code = error_code(e)
        if code is None:
            raise
        raise BertJaxError(f"{path}: writing failed ({os.strerror(code)}); nothing was written "
                           f"there") from e


def error_code(error: BaseException):
    """The errno in an exception or the chain of exceptions behind it, or None."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, OSError) and error.errno:
            return error.errno
        found = re.search(r"(?:os_error_code='?|Os \{ code: |\[Errno )(\d+)", str(error))
        if found:
            return int(found.group(1))
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None
