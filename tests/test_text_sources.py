"""Streaming sources: the same paragraphs and document numbers as the in-memory rule, every
input kind, sharding, bounded pieces and bounded memory, and each error message."""

import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert_jax.data.text_files import read_text
from bert_jax.data.text_sources import (Source, content_hash, iter_paragraphs, list_sources,
                                        shard_sources)
from bert_jax.errors import BertJaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = sorted(glob.glob(os.path.join(ROOT, "data", "austen", "*.txt")))

# Blank lines of spaces and tabs, "\r\n", and blank lines before and after. After an odd run of
# blank lines the next paragraph keeps a leading "\n": the old regex split does the same.
HAND_MADE = ("\r\n \t\r\nFirst line\r\nsecond\r\n  \t \r\n\r\nThird\n\n\nFourth  \n \n")
HAND_MADE_PARAGRAPHS = ["First line\nsecond", "\nThird", "\nFourth  "]

# Records 0-4 (null and empty text keep their numbers); the jsonl form adds a blank line.
RECORDS = ["A\n\nB", None, "", "C\r\n \r\nD", "E"]
RECORD_PARAGRAPHS = [(0, "A"), (0, "B"), (3, "C"), (3, "D"), (4, "E")]


def _reference_paragraphs(text):
    """The in-memory rule the streaming reader must match: blocks between blank lines."""
    blocks = re.compile(r"\n[ \t\r\f\v]*\n").split(text.replace("\r\n", "\n"))
    return [block for block in blocks if block.strip()]


def _one(path, **kwargs):
    sources = list_sources(str(path))
    assert len(sources) == 1
    return list(iter_paragraphs(sources[0], **kwargs))


def _write_jsonl(path, records, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        for i, text in enumerate(records):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
            if i == 1:
                f.write("  \n")  # blank lines are not records


@pytest.mark.parametrize("path", AUSTEN, ids=os.path.basename)
def test_austen_paragraphs_match_the_in_memory_rule(path):
    old = _reference_paragraphs(read_text(path))
    assert len(old) > 1000
    assert _one(path, documents="file") == [(0, p) for p in old]
    assert _one(path, documents="blank_line") == list(enumerate(old))


def test_hand_made_text(tmp_path):
    assert _reference_paragraphs(HAND_MADE) == HAND_MADE_PARAGRAPHS
    path = tmp_path / "hand.txt"
    path.write_bytes(b"\xef\xbb\xbf" + HAND_MADE.encode("utf-8"))  # a byte-order mark is dropped
    assert _one(path) == [(0, p) for p in HAND_MADE_PARAGRAPHS]
    assert _one(path, documents="blank_line") == list(enumerate(HAND_MADE_PARAGRAPHS))
    for limit in (1, 3, 7):  # tiny limits: pieces hold the same non-space characters, in order
        pieces = _one(path, max_paragraph_chars=limit)
        assert all(len(p) <= limit for _, p in pieces)
        assert "".join("".join(p.split()) for _, p in pieces) == \
            "".join("".join(p.split()) for p in HAND_MADE_PARAGRAPHS)


def test_gzip_text_is_the_plain_text(tmp_path):
    plain = AUSTEN[0]
    for name in ("novel.txt.gz", "novel.gz"):
        with open(plain, "rb") as f, gzip.open(tmp_path / name, "wb") as g:
            g.write(f.read())
        (source,) = list_sources(str(tmp_path / name))
        assert (source.kind, source.compressed) == ("text", True)
        assert list(iter_paragraphs(source, documents="blank_line")) == \
            _one(plain, documents="blank_line")


def test_jsonl_gzip_jsonl_and_parquet_number_documents_by_record(tmp_path):
    _write_jsonl(tmp_path / "a.jsonl", RECORDS)
    _write_jsonl(tmp_path / "b.json", RECORDS)
    _write_jsonl(tmp_path / "c.jsonl.gz", RECORDS, opener=gzip.open)
    pq.write_table(pa.table({"id": list(range(5)), "text": RECORDS}), tmp_path / "d.parquet",
                   row_group_size=2)
    sources = list_sources(str(tmp_path / "*"))
    assert [(s.index, s.kind, s.compressed) for s in sources] == [
        (0, "jsonl", False), (1, "jsonl", False), (2, "jsonl", True), (3, "parquet", False)]
    for source in sources:  # `documents` applies to text files only
        for documents in ("file", "blank_line"):
            assert list(iter_paragraphs(source, documents=documents)) == RECORD_PARAGRAPHS


def test_list_sources_kinds_order_and_dedup(tmp_path):
    for name in ("b.TXT.gz", "a.txt", "c.md", "d.JSONL", "e.Parquet"):
        (tmp_path / name).write_bytes(b"x")
    paths = [str(tmp_path / "e.Parquet"), str(tmp_path / "*"), str(tmp_path / "a.txt")]
    assert list_sources(paths) == [
        Source(str(tmp_path / "a.txt"), 0, "text"),
        Source(str(tmp_path / "b.TXT.gz"), 1, "text", compressed=True),
        Source(str(tmp_path / "c.md"), 2, "text"),
        Source(str(tmp_path / "d.JSONL"), 3, "jsonl"),
        Source(str(tmp_path / "e.Parquet"), 4, "parquet")]
    # a dataset ignores `files`, even a pattern that matches nothing
    assert list_sources(str(tmp_path / "nothing*"), dataset="org/name", dataset_config="en",
                        dataset_split="validation") == [
        Source("org/name", 0, "dataset", config="en", split="validation")]


def test_dataset_source_shards_by_record(tmp_path):
    directory = tmp_path / "corpus"
    directory.mkdir()
    records = [f"record {r}\n\nsecond {r}" if r != 5 else None for r in range(10)]
    _write_jsonl(directory / "data.jsonl", records)
    (source,) = list_sources(None, dataset=str(directory))
    assert list(iter_paragraphs(source, shard=1, num_shards=3)) == [
        (r, f"{part} {r}") for r in (1, 4, 7) for part in ("record", "second")]
    everything = list(iter_paragraphs(source))
    assert [r for r, _ in everything] == [r for r in range(10) if r != 5 for _ in (0, 1)]
    with pytest.raises(BertJaxError, match=r"corpus: record 0: no field 'body' \(fields: id, "
                                           r"text\)$"):
        list(iter_paragraphs(source, text_field="body"))
    with pytest.raises(BertJaxError, match=r"corpus: no text in field 'text'$"):
        list(iter_paragraphs(source, shard=5, num_shards=10))  # record 5 only: null


def test_shard_sources_partition(tmp_path):
    for i in range(10):
        (tmp_path / f"{i:02d}.txt").write_text(f"text {i}\n")
    sources = list_sources(str(tmp_path / "*.txt"))
    shards = [shard_sources(sources, i, 4) for i in range(4)]
    assert [[s.index for s in shard] for shard in shards] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert sorted((s for shard in shards for s in shard), key=lambda s: s.index) == sources
    assert shard_sources(sources, 0, 1) == sources
    for shard, num_shards, flag in ((4, 4, "--shard"), (-1, 4, "--shard"), (0, 0, "--num-shards"),
                                    (0, -2, "--num-shards"), (True, 4, "--shard")):
        with pytest.raises(BertJaxError, match=f"^{flag}: expected an integer"):
            shard_sources(sources, shard, num_shards)
        with pytest.raises(BertJaxError, match=f"^{flag}: expected an integer"):
            iter_paragraphs(sources[0], shard=shard, num_shards=num_shards)


def test_long_paragraphs_come_in_bounded_pieces(tmp_path):
    limit = 1 << 20
    block = "\n".join(f"line {i:07d} " + "x" * 88 for i in range(30_000))  # 3 MB, no blank line
    line = "y" * (2 * limit + 123)  # one line over twice the limit
    path = tmp_path / "long.txt"
    path.write_text(f"before\n\n{block}\n\n{line}\n\nafter\n")
    pieces = _one(path, documents="blank_line", max_paragraph_chars=limit)
    assert pieces[0] == (0, "before") and pieces[-1] == (3, "after\n")
    block_pieces = [p for k, p in pieces if k == 1]
    assert len(block_pieces) >= 3 and "\n".join(block_pieces) == block
    assert all(len(p) <= limit for p in block_pieces)
    assert [len(p) for k, p in pieces if k == 2] == [limit, limit, 123]
    assert "".join(p for k, p in pieces if k == 2) == line


MEMORY_SCRIPT = textwrap.dedent("""
    import json, resource, sys, types
    # Register the package without running its __init__: that imports jax (~165 MB peak),
    # and this measures the reader, which needs only errors.py and data/.
    package = types.ModuleType("bert_jax")
    package.__path__ = [sys.argv[1]]
    sys.modules["bert_jax"] = package
    from bert_jax.data.text_sources import iter_paragraphs, list_sources
    assert "jax" not in sys.modules and "datasets" not in sys.modules
    (source,) = list_sources(sys.argv[2])
    count = chars = longest = last = 0
    for number, piece in iter_paragraphs(source, documents="blank_line"):
        count, chars, last = count + 1, chars + len(piece), number
        longest = max(longest, len(piece))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(dict(count=count, chars=chars, longest=longest, last=last, peak_kib=peak_kib)))
""")

LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def test_a_200_mb_file_streams_in_bounded_memory(tmp_path):
    paragraph = "\n".join(f"{i:03d} " + "w" * 1995 for i in range(20)) + "\n\n"  # 40 kB
    giant = "\n".join("g" * 999 for _ in range(30_000))  # 30 MB without a blank line
    path = tmp_path / "big.txt"
    with open(path, "w", encoding="ascii") as f:
        for _ in range(4_250):
            f.write(paragraph)
        f.write(giant)
    size = os.path.getsize(path)
    assert size > 200_000_000
    # Through a small launcher: Linux keeps ru_maxrss across exec, so a child started straight
    # from this pytest process (jax, pyarrow, datasets loaded) would report pytest's own peak.
    out = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-c", MEMORY_SCRIPT,
                          os.path.join(ROOT, "bert_jax"), str(path)],
                         capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout)
    giant_pieces = -(-len(giant) // (1 << 20))  # at least this many, each under 1 MiB
    assert result["count"] >= 4_250 + giant_pieces
    assert result["last"] == 4_250  # the giant paragraph is one paragraph, in pieces
    assert result["longest"] <= 1 << 20
    newlines_dropped = 4_250 * 2 + (result["count"] - 4_250 - 1)  # breaks, and piece joins
    assert result["chars"] == size - newlines_dropped
    assert result["peak_kib"] < 150 * 1024, result


def test_utf8_errors_name_the_byte_and_absolute_offset(tmp_path):
    cases = [(b"ok line\n\n\xff rest\n", 0xFF, 9, {}),
             (b"\xef\xbb\xbfab\xffc", 0xFF, 5, {}),  # the offset counts the byte-order mark
             (b"abc\xe2\x82", 0xE2, 3, dict(max_paragraph_chars=4)),  # split across reads
             (b"x" * 70_000 + b"\xc3(", 0xC3, 70_000, {})]  # past the first 64 KiB read
    for i, (data, byte, offset, kwargs) in enumerate(cases):
        path = tmp_path / f"bad{i}.txt"
        path.write_bytes(data)
        message = rf"^{re.escape(str(path))}: not UTF-8 text \(byte 0x{byte:02x} at offset "
        message += rf"{offset}\)$"
        with pytest.raises(BertJaxError, match=message):
            _one(path, **kwargs)
    with gzip.open(tmp_path / "bad.txt.gz", "wb") as f:  # offsets count decompressed bytes
        f.write(b"fine\n" * 1000 + b"\x80")
    with pytest.raises(BertJaxError, match=r"bad.txt.gz: not UTF-8 text \(byte 0x80 at offset "
                                           r"5000\)$"):
        _one(tmp_path / "bad.txt.gz")
    _write_jsonl(tmp_path / "bad.jsonl", ["fine"])
    with open(tmp_path / "bad.jsonl", "ab") as f:
        f.write(b'{"text": "\xff"}\n')
    with pytest.raises(BertJaxError, match=r"bad.jsonl: not UTF-8 text \(byte 0xff at offset "
                                           r"36\)$"):  # 26 + len('{"text": "')
        _one(tmp_path / "bad.jsonl")


def test_text_errors(tmp_path):
    (tmp_path / "blank.txt").write_text(" \n\t\r\n\n")
    with pytest.raises(BertJaxError, match=r"blank.txt: file contains no text$"):
        _one(tmp_path / "blank.txt")
    (tmp_path / "fake.txt.gz").write_bytes(b"not gzip at all")
    with pytest.raises(BertJaxError, match=r"fake.txt.gz: not a valid gzip file"):
        _one(tmp_path / "fake.txt.gz")
    (tmp_path / "t.parquet.gz").write_bytes(b"x")
    with pytest.raises(BertJaxError, match=r"t.parquet.gz: gzip of Parquet cannot be streamed"):
        list_sources(str(tmp_path / "t.parquet.gz"))
    (source,) = list_sources(str(tmp_path / "blank.txt"))
    with pytest.raises(BertJaxError, match=r"^documents: expected file or blank_line, got 'x'"):
        iter_paragraphs(source, documents="x")
    with pytest.raises(BertJaxError, match=r"^max_paragraph_chars: expected an integer ≥ 1"):
        iter_paragraphs(source, max_paragraph_chars=0)


def test_jsonl_errors(tmp_path):
    cases = [('{"text": "a"}\n\n{"text": oops}\n', r":3: not JSON \(Expecting value"),
             ('{"a": 1, "b": "x"}\n', r":1: no field 'text' \(fields: a, b\)$"),
             ('{"text": ["a"]}\n', r":1: field 'text' is not a string \(got list\)$"),
             ('["text"]\n', r":1: not a JSON object \(got list\)$"),
             ('{"text": null}\n{"text": " \\n "}\n', r": no text in field 'text'$")]
    for i, (content, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(content)
        with pytest.raises(BertJaxError, match=f"^{re.escape(str(path))}{message}"):
            _one(path)


def test_parquet_errors(tmp_path):
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), tmp_path / "cols.parquet")
    with pytest.raises(BertJaxError, match=r"cols.parquet: no column 'text' \(columns: a, b\)$"):
        _one(tmp_path / "cols.parquet")
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    with pytest.raises(BertJaxError, match=r"ints.parquet: column 'text' is not a string column"):
        _one(tmp_path / "ints.parquet")
    pq.write_table(pa.table({"text": pa.array([None, ""], pa.string())}), tmp_path / "e.parquet")
    with pytest.raises(BertJaxError, match=r"e.parquet: no text in field 'text'$"):
        _one(tmp_path / "e.parquet")
    (tmp_path / "fake.parquet").write_bytes(b"not parquet")
    with pytest.raises(BertJaxError, match=r"fake.parquet: not a Parquet file"):
        _one(tmp_path / "fake.parquet")


def test_content_hash(tmp_path):
    path = tmp_path / "a.txt.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"some text\n" * 100_000)
    (source,) = list_sources(str(path))
    expected = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    assert content_hash(source) == expected and len(expected) == 32
    datasets = [Source("org/name", 0, "dataset", config=c, split=s)
                for c, s in (("", "train"), ("en", "train"), ("", "test"))]
    digests = [content_hash(d) for d in datasets]
    assert len(set(digests)) == 3 and digests[0] == content_hash(datasets[0])


class _CountingFile:
    """A binary file that counts the bytes read from it."""

    def __init__(self, data: bytes):
        self.file, self.read_bytes = __import__("io").BytesIO(data), 0

    def readline(self, size=-1):
        line = self.file.readline(size)
        self.read_bytes += len(line)
        return line


def test_line_blocks_yields_lines_and_refuses_one_over_the_cap_without_reading_it(monkeypatch):
    from bert_jax.data import text_files
    monkeypatch.setattr(text_files, "_LINE_BLOCK", 1000)
    lines = [b"a" * 2500 + b"\n", b"\n", b"b" * 3000 + b"\n", b"c" * 3000]  # last: no newline
    got = list(text_files.line_blocks(_CountingFile(b"".join(lines)), "f.jsonl", 3000))
    assert got == lines  # a line of exactly the cap (newline not counted) passes
    assert list(text_files.line_blocks(_CountingFile(b"x\ny"), "f", None)) == [b"x\n", b"y"]
    # a 10 MB line after two good ones: refused naming line 3, having read the cap + one block
    f = _CountingFile(b"ok\nok\n" + b"z" * 10_000_000 + b"\nnever\n")
    with pytest.raises(BertJaxError) as e:
        list(text_files.line_blocks(f, "big.jsonl", 3000, "JSON record"))
    assert str(e.value) == ("big.jsonl:3: line longer than 3,000 bytes; a JSON record this long "
                            "is refused, not read whole")
    assert f.read_bytes <= 6 + 3000 + 1000
    with pytest.raises(BertJaxError, match=r"^f:1: line longer than 256 MiB; a table row"):
        list(text_files.line_blocks(_CountingFile(b"q" * ((256 << 20) + 1)), "f", 256 << 20,
                                    "table row"))


def test_a_pretraining_jsonl_line_over_the_limit_is_refused_naming_it(tmp_path, monkeypatch):
    """MAX_JSONL_LINE (256 MiB) patched to 1,000 bytes: the line that passes it is refused,
    plain or gzip, after the records before it were read."""
    from bert_jax.data import text_sources
    monkeypatch.setattr(text_sources, "MAX_JSONL_LINE", 1000)
    rows = [json.dumps({"text": "Short one."}), json.dumps({"text": "x " * 600}),
            json.dumps({"text": "never read"})]
    for name, opener in (("c.jsonl", open), ("c.jsonl.gz", gzip.open)):
        path = tmp_path / name
        with opener(path, "wt", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
        (source,) = list_sources(str(path))
        stream = iter_paragraphs(source)
        assert next(stream) == (0, "Short one.")
        with pytest.raises(BertJaxError) as e:
            next(stream)
        assert str(e.value) == (f"{path}:2: line longer than 1,000 bytes; a JSON record this "
                                f"long is refused, not read whole")
    monkeypatch.setattr(text_sources, "MAX_JSONL_LINE", 1300)  # 1,214 bytes: read
    assert [p for _, p in iter_paragraphs(source)][1] == "x " * 600
