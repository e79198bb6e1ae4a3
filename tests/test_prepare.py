"""Streamed preparation: N shards run one after another equal one shard, a spawned worker writes
the bytes this process writes, the manifest refuses a set that does not add up (naming the
shard or file), bad input names its file, and memory is bounded by the part, not the corpus."""

import json
import os
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bert_jax.data import prepared_set, text_sources, tokenize_corpus
from bert_jax.data.tokenize_corpus import tokenize_shard
from bert_jax.data import tokenizer as tok_lib
from bert_jax.data.pretraining_batches import OBJECTIVES, PretrainingBatches
from bert_jax.errors import BertJaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = dict(documents="blank_line", sentence_per_line=True)


def _corpus(root, files=8, docs_per_file=6, seed=0):
    """`files` text files of documents separated by blank lines, a sentence a line; sentence i
    of document d (numbered across files) is the word "d{d}s{i}", repeated. Returns the
    sources and a tokenizer of exactly those words."""
    rng = random.Random(seed)
    words, d = [], 0
    for f in range(files):
        docs = []
        for _ in range(docs_per_file):
            count = rng.randint(1, 25)
            docs.append("\n".join(" ".join([f"d{d}s{i}"] * rng.randint(1, 6))
                                  for i in range(count)))
            words += [f"d{d}s{i}" for i in range(count)]
            d += 1
        (root / f"c{f}.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join(list(tok_lib.SPECIAL_TOKENS) + words) + "\n",
                                    encoding="utf-8")
    return text_sources.list_sources(str(root / "c*.txt")), tok_lib.load(str(root / "vocab.txt"))


def _documents(data: prepared_set.PreparedSet) -> list[np.ndarray]:
    """Each document's tokens, in the set's document order."""
    return [data.tokens(int(data.starts[f]), int(data.starts[f + c]))
            for f, c in zip(data.doc_first, data.doc_count)]


def _files(directory) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = open(path, "rb").read()
    return out


def _one_line(error) -> str:
    assert "\n" not in str(error.value)
    return str(error.value)


@pytest.mark.parametrize("documents", ["blank_line", "file"])
def test_four_shards_one_after_another_equal_one_shard(tmp_path, monkeypatch, documents):
    sources, tok = _corpus(tmp_path)
    # small chunks and parts: many parts a shard, and (documents="file") documents across parts
    monkeypatch.setattr(tokenize_corpus, "CHUNK_CHARS", 300)
    kwargs = dict(documents=documents, sentence_per_line=True, part_tokens=200)
    four = [tokenize_shard(sources, tok, str(tmp_path / "four"), shard=i, num_shards=4,
                           **kwargs) for i in range(4)]
    assert four[:3] == [None] * 3 and four[3] is not None  # the last job writes the manifest
    one = tokenize_shard(sources, tok, str(tmp_path / "one"), **kwargs)
    for key in ("documents", "sentences", "tokens", "characters"):
        assert four[3][key] == one[key] > 0
    assert one["documents"] == (48 if documents == "blank_line" else 8)
    assert [s["source_files"] for s in four[3]["shards"]] == [
        [src.name for src in sources[i::4]] for i in range(4)]
    assert min(len(s["parts"]) for s in four[3]["shards"]) > 1
    a, b = prepared_set.PreparedSet.open(str(tmp_path / "four")), prepared_set.PreparedSet.open(
        str(tmp_path / "one"))
    assert not np.array_equal(a.doc_first, b.doc_first)  # stored in another order, yet
    for name in ("doc_count", "doc_source", "doc_number"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for x, y in zip(_documents(a), _documents(b)):
        assert x.tobytes() == y.tobytes()
    if documents == "file":  # documents continue in the next part file
        bounds = a._part_base[1:-1]
        spans = [(a.starts[f], a.starts[f + c]) for f, c in zip(a.doc_first, a.doc_count)]
        assert sum(((start < bounds) & (bounds < stop)).any() for start, stop in spans) >= 4
    specials = tok_lib.special_token_ids(tok)
    for objective in OBJECTIVES:
        runs = [PretrainingBatches(data, specials, objective=objective, max_seq_length=24,
                                eval_fraction=0.1, seed=5) for data in (a, b)]
        assert runs[0].epoch_rows(0) == runs[1].epoch_rows(0)
        steps = sum(runs[0].epoch_rows(e) // 4 for e in range(2))
        for step in range(steps):  # every row of epochs 0 and 1
            x, y = (run.train_batch(step, 4) for run in runs)
            assert all(x[k].tobytes() == y[k].tobytes() for k in y) and len(x) == len(y)
        x, y = (run.heldout() for run in runs)
        assert len(x["input_ids"]) > 0 and all(x[k].tobytes() == y[k].tobytes() for k in y)


def test_a_spawned_worker_writes_the_same_bytes(tmp_path, monkeypatch):
    sources, tok = _corpus(tmp_path)
    monkeypatch.setattr(tokenize_corpus, "CHUNK_CHARS", 300)  # chunks are made here, in either case
    for workers in (0, 1):
        tokenize_shard(sources, tok, str(tmp_path / f"w{workers}"), workers=workers,
                       part_tokens=200, **LINES)
    here, worker = _files(tmp_path / "w0"), _files(tmp_path / "w1")
    assert sum(name.endswith(".arrow") for name in here) > 3
    assert here.keys() == worker.keys() and here == worker


def test_the_manifest_waits_for_every_shard_and_names_the_missing_one(tmp_path, monkeypatch):
    sources, tok = _corpus(tmp_path)
    out = str(tmp_path / "set")
    for shard in (0, 2):
        assert tokenize_shard(sources, tok, out, shard=shard, num_shards=4, **LINES) is None
    for check in (prepared_set.PreparedSet.open, prepared_set.verify):
        with pytest.raises(BertJaxError) as error:
            check(out)
        assert _one_line(error) == (f"{out}: shard shard-00001-of-00004 is missing (2 of 4 "
                                    f"missing); run `bert-jax prepare … --shard 1 "
                                    f"--num-shards 4`")
    assert tokenize_shard(sources, tok, out, shard=1, num_shards=4, **LINES) is None
    with pytest.raises(BertJaxError, match=r"shard-00003-of-00004 is missing \(1 of 4 missing\); "
                                           r"run `bert-jax prepare … --shard 3 --num-shards 4`$"):
        prepared_set.PreparedSet.open(out)
    assert not os.path.exists(os.path.join(out, prepared_set.MANIFEST))
    manifest = tokenize_shard(sources, tok, out, shard=3, num_shards=4, **LINES)
    assert manifest == prepared_set.read_json(os.path.join(out, prepared_set.MANIFEST))
    assert manifest["documents"] == 48 and len(manifest["shards"]) == 4
    # a finished shard is not prepared again: its job only returns the manifest
    monkeypatch.setattr(tokenize_corpus, "_write_shard", lambda *a: pytest.fail("prepared again"))
    assert tokenize_shard(sources, tok, out, shard=1, num_shards=4, **LINES) == manifest
    # the last job stopped between its shard and the manifest: opening the set writes it
    os.remove(os.path.join(out, prepared_set.MANIFEST))
    assert prepared_set.PreparedSet.open(out).num_documents == 48
    assert prepared_set.read_json(os.path.join(out, prepared_set.MANIFEST)) == manifest


def test_a_shard_of_other_parameters_is_refused(tmp_path):
    sources, tok = _corpus(tmp_path)
    out = str(tmp_path / "set")
    tokenize_shard(sources, tok, out, shard=0, num_shards=2, documents="file")
    vocab = _files(os.path.join(out, prepared_set.VOCAB))
    (tmp_path / "other.txt").write_text((tmp_path / "vocab.txt").read_text() + "extra\n")
    other_vocab = tok_lib.load(str(tmp_path / "other.txt"))
    shard0 = os.path.join(out, "shard-00000-of-00002")
    for tokenizer, kwargs, difference in (
            (tok, dict(documents="blank_line"), "documents 'file' vs 'blank_line'"),
            (tok, dict(sentence_per_line=True), "sentence_per_line False vs True"),
            (other_vocab, {}, "vocab_hash "), (tok, dict(num_shards=3), "num_shards 2 vs 3")):
        with pytest.raises(BertJaxError) as error:
            tokenize_shard(sources, tokenizer, out, **dict(dict(shard=1, num_shards=2), **kwargs))
        message = _one_line(error)
        assert message.startswith(f"{shard0}: prepared with other parameters than this job "
                                  f"(the shard's vs this job's: {difference}")
        assert message.endswith("); use another --out")
    # the refused jobs changed nothing
    assert _files(os.path.join(out, prepared_set.VOCAB)) == vocab
    assert sorted(os.listdir(out)) == ["shard-00000-of-00002", "vocab"]  # nor made a manifest
    # a shard of other parameters copied in beside it is refused when the set is opened
    tokenize_shard(sources, tok, str(tmp_path / "lines"), shard=1, num_shards=2, **LINES)
    os.rename(tmp_path / "lines" / "shard-00001-of-00002", os.path.join(out,
                                                                        "shard-00001-of-00002"))
    with pytest.raises(BertJaxError) as error:
        prepared_set.PreparedSet.open(out)
    assert re.fullmatch(re.escape(os.path.join(out, "shard-00001-of-00002")) +
                        r": prepared with other parameters than shard-00000-of-00002 \(documents "
                        r"'blank_line' vs 'file'; sentence_per_line True vs False\)",
                        _one_line(error))
    assert not os.path.exists(os.path.join(out, prepared_set.MANIFEST))


def test_a_changed_set_is_refused_naming_the_file(tmp_path):
    sources, tok = _corpus(tmp_path)
    out = str(tmp_path / "set")
    for shard in range(2):
        tokenize_shard(sources, tok, out, shard=shard, num_shards=2, **LINES)
    manifest_path = os.path.join(out, prepared_set.MANIFEST)
    shard = os.path.join(out, "shard-00001-of-00002")
    part, record = os.path.join(shard, "part-00000.arrow"), os.path.join(shard, "shard.json")
    original = {path: open(path, "rb").read() for path in (part, record, manifest_path)}
    size = len(original[part])

    def refused(pattern):
        with pytest.raises(BertJaxError) as error:
            prepared_set.PreparedSet.open(out)
        assert re.fullmatch(pattern, _one_line(error)), str(error.value)
        for path, data in original.items():  # put the set back
            open(path, "wb").write(data)
        prepared_set.PreparedSet.open(out)

    open(part, "wb").write(original[part][:-8])  # truncated
    refused(rf"{re.escape(part)}: {size - 8} bytes, {re.escape(manifest_path)} says {size}")
    open(part, "ab").write(b"\0" * 8)  # grown
    refused(rf"{re.escape(part)}: {size + 8} bytes, {re.escape(manifest_path)} says {size}")
    os.remove(part)
    refused(rf"{re.escape(part)}: missing")
    edited = json.loads(original[record])
    edited["characters"] += 1  # the shard's record edited after the manifest was written
    prepared_set.write_json(record, edited)
    refused(rf"{re.escape(record)}: does not match {re.escape(manifest_path)} \(the shard was "
            r"prepared again with other inputs\); prepare the set again")
    stale = json.loads(original[manifest_path])
    stale["format_version"] = prepared_set.FORMAT_VERSION - 1
    prepared_set.write_json(manifest_path, stale)
    refused(rf"{re.escape(manifest_path)}: format_version {prepared_set.FORMAT_VERSION - 1}, this "
            rf"version reads {prepared_set.FORMAT_VERSION}; prepare the set again")
    with pytest.raises(BertJaxError, match=r"empty: not a prepared set \(no manifest.json, no "
                                           r"shards\); run `bert-jax prepare`$"):
        prepared_set.PreparedSet.open(str(tmp_path / "empty"))


def test_bad_input_names_the_file(tmp_path):
    sources, tok = _corpus(tmp_path, files=1)
    latin1, empty = tmp_path / "latin1.txt", tmp_path / "empty.txt"
    latin1.write_bytes(b"d0s0 caf\xe9\n\nd0s1\n")
    empty.write_bytes(b"")
    for files, message in ((str(tmp_path / "missing.txt"), "missing.txt: file not found"),
                           (str(tmp_path / "none-*.txt"), r"none-\*.txt: no file matches"),
                           (str(empty), "empty.txt: file is empty"),
                           ([sources[0].name, str(latin1)],
                            r"latin1.txt: not UTF-8 text \(byte 0xe9 at offset 8\)$")):
        with pytest.raises(BertJaxError, match=message) as error:
            tokenize_shard(text_sources.list_sources(files), tok, str(tmp_path / "set"))
        _one_line(error)
    assert not (tmp_path / "set").exists()  # no shard, no half-written one, no vocabulary
    with pytest.raises(BertJaxError, match=r"^documents: expected file or blank_line, got 'x'"):
        tokenize_shard(sources, tok, str(tmp_path / "set"), documents="x")
    with pytest.raises(BertJaxError, match=r"^--shard: expected an integer in \[0, 2\)"):
        tokenize_shard(sources, tok, str(tmp_path / "set"), shard=2, num_shards=2)


def test_a_dataset_source_is_split_by_record_across_shards(tmp_path):
    directory = tmp_path / "corpus"
    directory.mkdir()
    with open(directory / "data.jsonl", "w", encoding="utf-8") as f:
        for r in range(12):
            f.write(json.dumps({"text": "\n".join(f"d{r}s{i}" for i in range(r % 3 + 1))}) + "\n")
    words = [f"d{r}s{i}" for r in range(12) for i in range(3)]
    (tmp_path / "vocab.txt").write_text("\n".join(list(tok_lib.SPECIAL_TOKENS) + words) + "\n")
    tok = tok_lib.load(str(tmp_path / "vocab.txt"))
    sources = text_sources.list_sources(None, dataset=str(directory))
    for shard in range(3):
        manifest = tokenize_shard(sources, tok, str(tmp_path / "three"), shard=shard,
                                  num_shards=3, sentence_per_line=True)
    assert [s["documents"] for s in manifest["shards"]] == [4, 4, 4]  # records r ≡ I mod 3
    tokenize_shard(sources, tok, str(tmp_path / "one"), sentence_per_line=True)
    a, b = (prepared_set.PreparedSet.open(str(tmp_path / name)) for name in ("three", "one"))
    np.testing.assert_array_equal(a.doc_number, np.arange(12))
    np.testing.assert_array_equal(a.doc_count, np.arange(12) % 3 + 1)
    assert [x.tolist() for x in _documents(a)] == [x.tolist() for x in _documents(b)]
    assert _documents(a)[5].tolist() == [tok.token_to_id(f"d5s{i}") for i in range(3)]


MEMORY_SCRIPT = textwrap.dedent("""
    import json, os, resource, sys, types
    # Register the package without running its __init__ (which may import JAX): this measures
    # preparation, which needs only errors.py and data/.
    package = types.ModuleType("bert_jax")
    package.__path__ = [sys.argv[1]]
    sys.modules["bert_jax"] = package
    from bert_jax.data import text_sources, tokenizer
    from bert_jax.data.tokenize_corpus import tokenize_shard
    assert "jax" not in sys.modules
    corpus, vocab, out = sys.argv[2:5]

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    tok = tokenizer.load(vocab)
    # A first, tiny set loads what any preparation loads once (Arrow's kernels, the tokenizer's
    # threads: ~50 MB), so that the measure below is what the corpus costs.
    with open(os.path.join(out, "tiny.txt"), "w") as f:
        f.write("w1 w2\\nw3\\n\\nw4\\n")
    tokenize_shard(text_sources.list_sources(os.path.join(out, "tiny.txt")), tok,
                   os.path.join(out, "tiny"), documents="blank_line", sentence_per_line=True)
    before = rss_kib()
    manifest = tokenize_shard(text_sources.list_sources(corpus), tok, os.path.join(out, "set"),
                              documents="blank_line", sentence_per_line=True,
                              part_tokens=100_000)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(dict(growth_kib=peak - before, tokens=manifest["tokens"],
                          parts=len(manifest["shards"][0]["parts"]))))
""")

LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _measure(corpus, vocab, out) -> dict:
    os.makedirs(out)
    # Through a small launcher: Linux keeps ru_maxrss across exec, so a child started straight
    # from this pytest process would report pytest's own peak.
    run = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-c", MEMORY_SCRIPT,
                          os.path.join(ROOT, "bert_jax"), str(corpus), str(vocab), str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def test_preparing_a_corpus_holds_a_chunk_not_the_corpus(tmp_path):
    rng = random.Random(0)
    words = [f"w{i}" for i in range(1000)]
    block = "".join("\n".join(" ".join(rng.choices(words, k=rng.randint(3, 20)))
                              for _ in range(rng.randint(2, 40))) + "\n\n" for _ in range(300))
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text(block * (12_000_000 // len(block)))
    small.write_text(block * (3_000_000 // len(block)))
    (tmp_path / "vocab.txt").write_text("\n".join(list(tok_lib.SPECIAL_TOKENS) + words) + "\n")
    result = _measure(big, tmp_path / "vocab.txt", tmp_path / "big")
    quarter = _measure(small, tmp_path / "vocab.txt", tmp_path / "small")
    print(result, quarter)
    # Measured (2 cores): 12 MB of text, 2.39 M tokens in 12 parts, raised the peak by 51-54
    # MiB; a quarter of it (0.6 M tokens, 3 parts) by 48 MiB. That is the working set of the one
    # ~1 MB chunk being tokenised (its Encodings) and the part being written, whatever the
    # corpus: four times the text costs ~5 MiB more, where holding the extra 1.8 M tokens as
    # the old in-memory path did (lists of Python ints, ~36 bytes a token) would take ~62 MiB
    # more, and the whole corpus's tokens ~82 MiB (plus its 12 MB of text).
    assert result["tokens"] > 2_300_000 and result["parts"] >= 10
    assert result["growth_kib"] < 72 * 1024, result
    assert result["growth_kib"] - quarter["growth_kib"] < 16 * 1024, (result, quarter)
