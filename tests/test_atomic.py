"""Atomic directory replacement: a reader finds the previous directory or the complete new one
at `path` at every moment, never nothing; a failed write leaves `path` as it was."""

import ctypes
import errno
import logging
import os
import sys
import threading

import pytest

from bert_jax.model_files import atomic


def write_version(directory, version: str) -> None:
    with open(os.path.join(directory, "version.txt"), "w") as f:
        f.write(version)


def read_version(path) -> str:
    with open(os.path.join(path, "version.txt")) as f:
        return f.read()


def replace(path, version: str) -> None:
    with atomic.atomic_directory(str(path), overwrite=True) as tmp:
        write_version(tmp, version)


@pytest.fixture
def old(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    write_version(path, "old")
    return path


def test_path_holds_a_complete_directory_at_every_step(old, monkeypatch):
    """Every rename / swap the replacement makes finds `path` a readable directory, before and
    after: the old version until the new one is in place."""
    seen = []

    def checked(name, call):
        def wrapper(*args, **kwargs):
            assert os.path.isdir(old), f"{old} missing before {name}{args}"
            seen.append((name, read_version(old)))
            result = call(*args, **kwargs)
            assert os.path.isdir(old), f"{old} missing after {name}{args}"
            seen.append((name, read_version(old)))
            return result
        return wrapper

    monkeypatch.setattr(os, "rename", checked("rename", os.rename))
    monkeypatch.setattr(os, "replace", checked("replace", os.replace))
    if hasattr(atomic, "_exchange"):  # the swap, where there is one
        monkeypatch.setattr(atomic, "_exchange", checked("exchange", atomic._exchange))
    replace(old, "new")
    assert read_version(old) == "new"
    assert [version for _, version in seen] == ["old", "new"]  # one step: the swap
    assert os.listdir(old.parent) == ["model"]  # the previous directory is gone


def test_a_polling_reader_never_finds_the_path_missing(old):
    """100 replacements while another thread checks the path as fast as it can."""
    done, misses, polls = threading.Event(), [], [0]

    def poll():
        while not done.is_set():
            polls[0] += 1
            if not os.path.isdir(old):
                misses.append(polls[0])

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for i in range(100):
            replace(old, str(i))
    finally:
        done.set()
        reader.join()
    assert misses == [] and polls[0] > 100
    assert read_version(old) == "99" and os.listdir(old.parent) == ["model"]


def fake_renameat2(code):
    def call(*args):
        ctypes.set_errno(code)
        return -1
    return lambda: call


@pytest.mark.parametrize("unsupported", ["ENOSYS", "EINVAL", "non-Linux"])
def test_falls_back_to_two_renames_where_the_swap_is_unsupported(old, unsupported, monkeypatch,
                                                                 caplog):
    if unsupported == "non-Linux":
        monkeypatch.setattr(sys, "platform", "darwin")
    else:
        monkeypatch.setattr(atomic, "_renameat2", fake_renameat2(getattr(errno, unsupported)))
    with caplog.at_level(logging.DEBUG, logger=atomic.__name__):
        replace(old, "new")
    assert read_version(old) == "new" and os.listdir(old.parent) == ["model"]
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "two renames" in caplog.records[0].getMessage()


def test_another_swap_error_is_raised_and_path_is_untouched(old, monkeypatch):
    monkeypatch.setattr(atomic, "_renameat2", fake_renameat2(errno.EACCES))
    with pytest.raises(PermissionError):
        replace(old, "new")
    assert read_version(old) == "old" and os.listdir(old.parent) == ["model"]


def test_an_error_while_writing_removes_the_temporary_and_keeps_path(old):
    with pytest.raises(RuntimeError, match="half-written"):
        with atomic.atomic_directory(str(old), overwrite=True) as tmp:
            write_version(tmp, "new")
            raise RuntimeError("half-written")
    assert read_version(old) == "old" and os.listdir(old.parent) == ["model"]


def test_a_new_path_and_a_symlinked_one(tmp_path):
    """A fresh path is created; a symlink at `path` is replaced, its target left alone."""
    replace(tmp_path / "fresh", "1")
    assert read_version(tmp_path / "fresh") == "1"
    (tmp_path / "link").symlink_to(tmp_path / "fresh", target_is_directory=True)
    replace(tmp_path / "link", "2")
    assert not os.path.islink(tmp_path / "link") and read_version(tmp_path / "link") == "2"
    assert read_version(tmp_path / "fresh") == "1"
    assert sorted(os.listdir(tmp_path)) == ["fresh", "link"]


def test_a_non_empty_directory_needs_overwrite(old):
    with pytest.raises(atomic.BertJaxError, match="not empty .pass overwrite=True"):
        with atomic.atomic_directory(str(old)):
            pass
    assert read_version(old) == "old" and os.listdir(old.parent) == ["model"]


def test_an_output_file_that_is_the_input_is_refused_naming_parameters(tmp_path):
    source = tmp_path / "data.csv"
    source.write_text("text\nok\n")
    with pytest.raises(atomic.BertJaxError, match="output_file would overwrite input_file$"):
        atomic.check_output_file(str(source), (".csv",), str(source))
    atomic.check_output_file(str(tmp_path / "out.csv"), (".csv",), str(source))


# -- durable, private to no one, safe in a shared directory ---------------------------------------

def recording_fsync(monkeypatch) -> list:
    """os.fsync patched to record what each call synced (a file's or directory's path), in order,
    with os.replace / os.rename recorded between them."""
    events = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def moved(name, call):
        def wrapper(a, b, *args, **kwargs):
            events.append((name, str(b)))
            return call(a, b, *args, **kwargs)
        return wrapper
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", moved("replace", real_replace))
    monkeypatch.setattr(os, "rename", moved("rename", real_rename))
    return events


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name fds")
def test_a_file_is_synced_before_its_rename_and_its_directory_after(tmp_path, monkeypatch):
    events = recording_fsync(monkeypatch)
    target = tmp_path / "out.json"
    atomic.write_json(str(target), {"a": 1})
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"], events
    assert os.path.basename(events[0][1]).startswith(".out.tmp-")  # the data, under its temp name
    assert events[2][1] == str(tmp_path)  # the new directory entry


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name fds")
def test_a_directory_is_synced_file_by_file_before_it_takes_the_place(tmp_path, monkeypatch):
    events = recording_fsync(monkeypatch)
    replace(tmp_path / "model", "new")
    renamed = next(i for i, (kind, _) in enumerate(events) if kind == "rename")
    synced = [os.path.basename(p) for _, p in events[:renamed]]
    assert "version.txt" in synced and any(n.startswith(".model.tmp-") for n in synced)
    assert events[renamed + 1:] == [("fsync", str(tmp_path))]


def test_outputs_are_readable_as_the_umask_allows(tmp_path):
    """mkstemp / mkdtemp make 0600 / 0700: others on a shared cluster could not read an export."""
    previous = os.umask(0o022)
    try:
        atomic.write_json(str(tmp_path / "f.json"), [])
        replace(tmp_path / "d", "v")
    finally:
        os.umask(previous)
    assert (tmp_path / "f.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_the_temporary_name_is_unpredictable_and_a_planted_symlink_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in (f".out.tmp-{os.getpid()}.json", ".out.tmp.json"):  # names once predictable
        os.symlink(victim, tmp_path / name)
    atomic.write_json(str(tmp_path / "out.json"), {"a": 1})
    assert victim.read_text() == "precious"
    assert (tmp_path / "out.json").read_text() == '{\n  "a": 1\n}\n'


def test_a_temporary_swapped_for_a_symlink_during_the_write_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    with pytest.raises(atomic.BertJaxError, match="replaced by another file"):
        with atomic.atomic_file(str(tmp_path / "out.txt")) as tmp:
            os.remove(tmp)
            os.symlink(victim, tmp)
    assert not (tmp_path / "out.txt").exists() and victim.read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["victim.txt"]


@pytest.mark.parametrize("message", [
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left '
    'on device" })',  # safetensors' Rust error
    "Error writing local file: os_error_code=28 [source locations='tensorstore/…']",  # orbax
])
def test_a_full_disk_in_a_writer_is_one_line(tmp_path, message):
    class WriterError(Exception):
        pass
    with pytest.raises(atomic.BertJaxError) as raised:
        with atomic.atomic_directory(str(tmp_path / "model")) as tmp:
            write_version(tmp, "half")
            raise WriterError(message)
    assert str(raised.value) == (f"{tmp_path / 'model'}: writing failed (No space left on "
                                 f"device); nothing was written there")
    assert os.listdir(tmp_path) == []


def test_an_error_without_an_errno_is_not_dressed_as_a_write_failure(tmp_path):
    with pytest.raises(KeyError):
        with atomic.atomic_directory(str(tmp_path / "model")):
            raise KeyError("a bug")
