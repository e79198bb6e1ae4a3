"""Atomic directory replacement: a reader finds the previous directory or the complete new one
at `path` at every moment, never nothing; a failed write leaves `path` as it was."""

import ctypes
import errno
import logging
import os
import sys
import threading

import pytest

from bert_jax.checkpoints import atomic


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
