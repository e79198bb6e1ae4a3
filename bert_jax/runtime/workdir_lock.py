"""One run per workdir: a second command on a busy workdir is refused in one line.

Two runs in one workdir (a command started twice, a scheduler's retry while the first still
runs) destroy each other's work: orbax's cleanup deletes the other's in-progress checkpoint,
saves of one step collide, logs interleave. The run holds `fcntl.flock` on WORKDIR/.lock, which
the kernel releases when the process ends however it ends (SIGKILL included), so a stale lock
never blocks a rerun. The file names its holder (pid and host) for the refusal, and is removed
when the run ends: a refused or finished run leaves the workdir as it found it.

flock works on local file systems and on NFS (v4, where Linux emulates it with byte-range
locks); in a multi-process run only process 0 takes it (cli/jobs.py), since the others may
share its workdir.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time

from bert_jax.model_files import paths
from bert_jax.errors import BertJaxError

_HOLDER_WAIT = 2.0  # seconds a refusal waits for a just-started holder to write its name


@contextlib.contextmanager
def hold(workdir: str):
    """Holds `workdir`'s lock while the block runs (creating the workdir, which is removed again
    if nothing else was written into it); refuses in one line if another run holds it."""
    created = _missing_dirs(workdir)
    os.makedirs(workdir, exist_ok=True)
    lock = os.path.join(workdir, paths.LOCK)
    try:
        fd = _acquire(lock, workdir)
    except BaseException:
        _remove_if_empty(created)
        raise
    try:
        os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # a refused new workdir may be gone
            os.unlink(lock)  # before the lock is released: a waiting opener retries (below)
        os.close(fd)
        _remove_if_empty(created)


def _acquire(lock: str, workdir: str) -> int:
    """An fd of `lock` with the exclusive flock on it; the file it names is the one at `lock`
    (a holder that ended unlinks it: a lock won on the unlinked file would guard nothing)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BertJaxError(f"{workdir}: another run is using this workdir ({holder}); wait "
                               f"for it to end or give another workdir") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            if os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                os.ftruncate(fd, 0)  # a killed holder's name
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _holder(fd: int) -> str:
    """The holder's "pid N on host H", waiting briefly for one that has just taken the lock."""
    deadline = time.monotonic() + _HOLDER_WAIT
    while True:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        if text or time.monotonic() > deadline:
            return text or "its holder has not named itself yet"
        time.sleep(0.05)


def _missing_dirs(workdir: str) -> list[str]:
    """`workdir` and its missing parents (runs/ of runs/tiny), deepest first: what makedirs
    creates, so a refused run can take all of it back."""
    missing, path = [], os.path.abspath(workdir)
    while not os.path.isdir(path) and path != os.path.dirname(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def _remove_if_empty(created: list[str]) -> None:
    for path in created:  # deepest first; one the run wrote into stays, and so do its parents
        try:
            os.rmdir(path)
        except OSError:
            return
