"""Inputs → a stream of (document number, paragraph), a line at a time, never a whole file.

Pretraining corpora run to gigabytes, so every reader here holds at most one line, one JSON
record (a line over 256 MiB is refused) or one Parquet batch, plus a paragraph of at most `max_paragraph_chars` characters. A
multi-machine run gives shard I of N the sources I, I+N, … (shard_sources); one streaming
`datasets` source is split by record instead (iter_paragraphs). Paragraphs of plain text are
exactly those of the in-memory rule used so far: blocks split at "\\n[ \\t\\r\\f\\v]*\\n" after
"\\r\\n" → "\\n", whitespace-only blocks dropped (with its quirk that after an odd run of blank
lines the next block starts with "\\n").
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import zlib
from typing import Iterable, Iterator, Optional, Sequence, Union

from bert_jax import json_limits
from bert_jax.data.text_files import decode as _decode, line_blocks, resolve_files
from bert_jax.errors import BertJaxError

DOCUMENT_MODES = ("file", "blank_line")
KINDS = ("text", "jsonl", "parquet", "dataset")

_BLANK = " \t\r\f\v"  # the characters a paragraph-breaking line may hold (not Unicode spaces)
_BOM = b"\xef\xbb\xbf"
_LINE, _LAST, _CUT = "line", "last", "cut"  # ended by "\n"; ended by the end of input; cut short
# a JSON line longer is refused, not read whole: parsed, it would take several times as much
MAX_JSONL_LINE = 256 << 20


@dataclasses.dataclass(frozen=True)
class Source:
    """One input: a file, or a `datasets` dataset read in streaming mode."""
    name: str  # the path, or the dataset name (for logs and errors)
    index: int  # position in the sorted list of all sources: orders documents across shards
    kind: str  # one of KINDS
    compressed: bool = False  # gzip of `kind` (text and jsonl only)
    config: str = ""  # dataset only: its configuration ("" for the default)
    split: str = "train"  # dataset only

    def __post_init__(self):
        if self.kind not in KINDS:
            raise BertJaxError(f"{self.name}: kind expected {' or '.join(KINDS)}, "
                               f"got {self.kind!r}")


def list_sources(files: Union[str, Sequence[str], None], *, dataset: str = "",
                 dataset_config: str = "", dataset_split: str = "train") -> list[Source]:
    """Sources for a glob, a path or a list of either (sorted, deduplicated), kind by extension:
    .jsonl/.json (JSON lines), .parquet, a trailing .gz for gzip of .jsonl/.json or of text,
    anything else UTF-8 text. A non-empty `dataset` gives the one streaming source
    load_dataset(dataset, dataset_config or None, split=dataset_split) and `files` is ignored;
    a local dataset is a directory of data files (a single file is given as `files`)."""
    if dataset:
        return [Source(dataset, 0, "dataset", config=dataset_config, split=dataset_split)]
    return [_file_source(path, i) for i, path in enumerate(sorted(resolve_files(files)))]


def _file_source(path: str, index: int) -> Source:
    stem = path.lower()
    compressed = stem.endswith(".gz")
    stem = stem.removesuffix(".gz")
    if stem.endswith(".parquet"):
        if compressed:
            raise BertJaxError(f"{path}: gzip of Parquet cannot be streamed; decompress it "
                               "(Parquet compresses its columns itself)")
        return Source(path, index, "parquet")
    kind = "jsonl" if stem.endswith((".jsonl", ".json")) else "text"
    return Source(path, index, kind, compressed=compressed)


def shard_sources(sources: list[Source], shard: int, num_shards: int) -> list[Source]:
    """Sources shard, shard + num_shards, …: shards partition the list. A single dataset source
    is not split here but by record in iter_paragraphs."""
    _check_shard(shard, num_shards)
    return sources[shard::num_shards]


def _check_shard(shard, num_shards) -> None:
    def whole(value):
        return isinstance(value, int) and not isinstance(value, bool)

    if not whole(num_shards) or num_shards < 1:
        raise BertJaxError(f"--num-shards: expected an integer ≥ 1, got {num_shards!r}")
    if not whole(shard) or not 0 <= shard < num_shards:
        raise BertJaxError(f"--shard: expected an integer in [0, {num_shards}) "
                           f"(--num-shards {num_shards}), got {shard!r}")


def iter_paragraphs(source: Source, *, documents: str = "file", text_field: str = "text",
                    shard: int = 0, num_shards: int = 1,
                    max_paragraph_chars: int = 1 << 20) -> Iterator[tuple[int, str]]:
    """(document number within the source, paragraph), streaming.

    Text files: documents="file" numbers every paragraph 0, "blank_line" numbers paragraph k k.
    JSON lines, Parquet and datasets: record r (null or empty text included) is document r,
    its `text_field` split into paragraphs as text is; `documents` applies to text files only.
    A paragraph over `max_paragraph_chars` comes in several pieces (same document number) cut
    at line ends, a longer line cut at the limit, so memory stays bounded; such a line is never
    a paragraph break. shard/num_shards split a dataset source by record (r % num_shards ==
    shard, numbers stay global); file sources ignore them (see shard_sources).
    """
    if documents not in DOCUMENT_MODES:
        raise BertJaxError(f"documents: expected {' or '.join(DOCUMENT_MODES)}, "
                           f"got {documents!r}")
    if (not isinstance(max_paragraph_chars, int) or isinstance(max_paragraph_chars, bool)
            or max_paragraph_chars < 1):
        raise BertJaxError(f"max_paragraph_chars: expected an integer ≥ 1, "
                           f"got {max_paragraph_chars!r}")
    _check_shard(shard, num_shards)  # checked here, not at the first next()
    return _stream(source, documents, text_field, shard, num_shards, max_paragraph_chars)


def _stream(source, documents, text_field, shard, num_shards, limit):
    if source.kind == "text":
        pieces = _text_paragraphs(source, documents, limit)
    else:
        records = {"jsonl": _jsonl_records, "parquet": _parquet_records,
                   "dataset": _dataset_records}[source.kind](source, text_field, shard,
                                                             num_shards)
        pieces = ((r, p) for r, text in records if text
                  for _, p in _paragraph_pieces(_str_lines(text, limit), limit))
    empty = True
    for piece in pieces:
        empty = False
        yield piece
    if empty:
        raise BertJaxError(f"{source.name}: file contains no text" if source.kind == "text"
                           else f"{source.name}: no text in field '{text_field}'")


def content_hash(source: Source) -> str:
    """Hex blake2b (16 bytes) of the file's raw bytes (compressed ones for .gz), for cache keys.
    For a dataset, a hash of (name, config, split) only: a revision pinned in the name
    (`name@revision`, data/hub_datasets.py) is in it; an unpinned hub dataset updated upstream
    keeps its key."""
    digest = hashlib.blake2b(digest_size=16)
    if source.kind == "dataset":
        digest.update(json.dumps(["dataset", source.name, source.config, source.split])
                      .encode("utf-8"))
        return digest.hexdigest()
    with open(source.name, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open(source: Source):
    return gzip.open(source.name, "rb") if source.compressed else open(source.name, "rb")


def _gzip_errors(source: Source, items: Iterable):
    """`items`, with a corrupt or truncated gzip stream reported as a BertJaxError."""
    try:
        yield from items
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise BertJaxError(f"{source.name}: not a valid gzip file ({e})") from None


def _text_paragraphs(source: Source, documents: str, limit: int):
    with _open(source) as f:
        lines = _gzip_errors(source, _file_lines(f, source.name, limit))
        for k, piece in _paragraph_pieces(lines, limit):
            yield (0 if documents == "file" else k), piece


def _complete(raw: bytes) -> int:
    """Length of the prefix of `raw` that does not end inside a UTF-8 character."""
    for i in range(len(raw) - 1, max(len(raw) - 4, -1), -1):
        byte = raw[i]
        if byte & 0xC0 != 0x80:  # not a continuation byte: a character starts here
            need = 1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return i if len(raw) - i < need else len(raw)
    return len(raw)


def _cut_line(line: str, kind: str, limit: int):
    while len(line) > limit:
        yield line[:limit], _CUT
        line = line[limit:]
    yield line, kind


def _file_lines(f, path: str, limit: int):
    """(text, kind) for the lines of a binary file: "\\r\\n" as "\\n", a leading byte-order
    mark dropped, UTF-8 decoded strictly with absolute byte offsets in errors, lines longer
    than `limit` characters cut (kind _CUT) so no more than ~limit characters are held."""
    read_size = max(4, min(limit, 1 << 16))
    offset, carry, buf = 0, b"", ""
    while True:
        chunk = f.readline(read_size)
        raw = carry + chunk
        if offset == 0 and raw.startswith(_BOM):
            raw, offset = raw[3:], 3
        ends = raw.endswith(b"\n")
        carry = b""
        if chunk and not ends:  # part of a line: keep a split character for the next read
            cut = _complete(raw)
            raw, carry = raw[:cut], raw[cut:]
        buf += _decode(raw, path, offset)
        offset += len(raw)
        if ends:
            line = buf[:-1]
            yield from _cut_line(line[:-1] if line.endswith("\r") else line, _LINE, limit)
            buf = ""
        elif not chunk:
            yield from _cut_line(buf, _LAST, limit)
            return
        while len(buf) > limit + 1:  # one spare character: a "\r" that "\n" may yet drop
            yield buf[:limit], _CUT
            buf = buf[limit:]


def _str_lines(text: str, limit: int):
    """(text, kind) for the lines of a string, as _file_lines gives them for a file."""
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        yield from _cut_line(line, _LAST if i == len(lines) - 1 else _LINE, limit)


def _paragraph_pieces(lines, limit: int):
    """(paragraph number, piece) from (text, kind) lines. A line ended by "\\n" that follows
    one and holds only _BLANK characters breaks paragraphs; the "\\n" before it is consumed,
    so the next line cannot break again (as with a left-to-right regex split). Pieces join
    with "\\n" to their paragraph; whitespace-only pieces and paragraphs are dropped."""
    piece: list[str] = []
    size, number, yielded = 0, 0, False
    first, after_break, continued = True, False, False
    for text, kind in lines:
        if (kind == _LINE and not (first or after_break or continued)
                and not text.strip(_BLANK)):
            joined = "\n".join(piece)
            if joined.strip():
                yield number, joined
                yielded = True
            number += 1 if yielded else 0
            piece, size, yielded, after_break = [], 0, False, True
            continue
        first = after_break = False
        if kind == _CUT or (piece and size + 1 + len(text) > limit):
            joined = "\n".join(piece)
            if joined.strip():
                yield number, joined
                yielded = True
            piece, size = [], 0
        continued = kind == _CUT
        if continued:
            if text.strip():
                yield number, text
                yielded = True
            continue
        size += len(text) + (1 if piece else 0)
        piece.append(text)
    joined = "\n".join(piece)
    if joined.strip():
        yield number, joined


def _field(record, field: str, where: str) -> Optional[str]:
    if not isinstance(record, dict):
        raise BertJaxError(f"{where}: not a JSON object (got {type(record).__name__})")
    if field not in record:
        raise BertJaxError(f"{where}: no field '{field}' (fields: {', '.join(map(str, record))})")
    value = record[field]
    if value is not None and not isinstance(value, str):
        raise BertJaxError(f"{where}: field '{field}' is not a string "
                           f"(got {type(value).__name__})")
    return value


def _jsonl_records(source: Source, field: str, shard: int, num_shards: int):
    """(record number, text or None) per non-blank line; shard/num_shards are unused."""
    path = source.name
    with _open(source) as f:
        record, offset = 0, 0
        lines = line_blocks(f, path, MAX_JSONL_LINE, "JSON record")
        for number, raw in enumerate(_gzip_errors(source, lines), 1):
            start = 3 if offset == 0 and raw.startswith(_BOM) else 0
            line = _decode(raw[start:], path, offset + start)
            offset += len(raw)
            if not line.strip():
                continue
            try:
                value = json_limits.loads(line, path, number)
            except json.JSONDecodeError as e:
                raise BertJaxError(f"{path}:{number}: not JSON ({e.msg} at column {e.colno})"
                                   ) from None
            yield record, _field(value, field, f"{path}:{number}")
            record += 1


def _parquet_records(source: Source, field: str, shard: int, num_shards: int):
    """(row number, text or None), a batch of rows at a time."""
    import pyarrow as pa  # imported here: only Parquet sources need it
    import pyarrow.parquet as pq

    path = source.name
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise BertJaxError(f"{path}: not a Parquet file ({e})") from None
    names = parquet.schema_arrow.names
    if field not in names:
        raise BertJaxError(f"{path}: no column '{field}' (columns: {', '.join(names)})")
    kind = parquet.schema_arrow.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)):
        raise BertJaxError(f"{path}: column '{field}' is not a string column (type {kind})")
    row = 0
    for batch in parquet.iter_batches(batch_size=1024, columns=[field]):
        for text in batch.column(0).to_pylist():
            yield row, text
            row += 1


def _dataset_records(source: Source, field: str, shard: int, num_shards: int):
    """(record number, text or None) for this shard's records (r % num_shards == shard)."""
    from bert_jax.data import hub_datasets  # datasets costs a second: only datasets need it

    config = source.config or None
    try:
        stream = hub_datasets.load_dataset(source.name, config, split=source.split,
                                           streaming=True)
    except (FileNotFoundError, ValueError, ConnectionError) as e:
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise BertJaxError(f"{source.name}: cannot load this dataset ({first_line})") from None
    for r, record in enumerate(stream):
        if r % num_shards == shard:
            yield r, _field(record, field, f"{source.name}: record {r}")
