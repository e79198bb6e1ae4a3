"""A prepared pretraining set on disk: tokenised sentences by document, in shards of Arrow files.

    DIR/manifest.json                      every shard, its parts and counts (the finished set)
    DIR/vocab/                             the vocabulary the set was tokenised with
    DIR/shard-00001-of-00004/shard.json    one preparation job's record (written last)
    DIR/shard-00001-of-00004/part-00000.arrow   rows: source, doc, ids (one row per sentence)

Sentences, not examples, are stored: pairs (or packed rows) are drawn per epoch at training time
(data/pair_plans.py), so every epoch sees new pairs without multiplying disk use. Parts are
uncompressed Arrow IPC files, read memory-mapped: training holds no token in its own memory.
Documents are ordered by (source, document number), so a set prepared in N shards trains exactly
as one prepared in one.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
from typing import Optional

import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer

from bert_jax.errors import BertJaxError

FORMAT_VERSION = 3  # bump whenever what is stored changes
MANIFEST = "manifest.json"
SHARD_RECORD = "shard.json"
VOCAB = "vocab"
_SHARD_DIR = re.compile(r"shard-(\d{5})-of-(\d{5})$")


def shard_dir_name(shard: int, num_shards: int) -> str:
    return f"shard-{shard:05d}-of-{num_shards:05d}"


def vocab_hash(tokenizer: Tokenizer) -> str:
    """The vocabulary and normalisation, not the padding/truncation state of this copy."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return hashlib.blake2b(copy.to_str().encode("utf-8"), digest_size=16).hexdigest()


def token_type(vocab_size: int) -> pa.DataType:
    """uint16 when every id fits: half the disk of int32 for vocabularies up to 65,536."""
    return pa.uint16() if vocab_size <= 1 << 16 else pa.int32()


def write_part(path: str, sources: np.ndarray, docs: np.ndarray, lengths: np.ndarray,
               ids: np.ndarray, id_type: pa.DataType) -> dict:
    """One part file (rows = sentences), written to a temporary name and renamed."""
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    table = pa.table({
        "source": pa.array(sources, pa.int32()), "doc": pa.array(docs, pa.int64()),
        "ids": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                        pa.array(ids, id_type))})
    tmp = f"{path}.tmp-{os.getpid()}"
    with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=len(table) or None)
    os.replace(tmp, path)
    return {"file": os.path.basename(path), "sentences": int(len(lengths)),
            "tokens": int(offsets[-1]), "bytes": os.path.getsize(path)}


def write_json(path: str, value: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BertJaxError(f"{path}: unreadable ({e})") from None


def shard_records(directory: str) -> dict[int, dict]:
    """The finished shards' records (shard.json) in `directory`, by shard number."""
    records = {}
    for path in sorted(glob.glob(os.path.join(directory, "shard-*-of-*", SHARD_RECORD))):
        match = _SHARD_DIR.search(os.path.dirname(path))
        if match:
            records[int(match.group(1))] = read_json(path)
    return records


def _identity(record: dict) -> dict:
    """What every shard of one set must share."""
    return {k: record[k] for k in ("format_version", "num_shards", "vocab_hash", "params")}


def try_finish(directory: str) -> Optional[dict]:
    """Write DIR/manifest.json once every shard has finished (any job may be the last); returns
    it, or None while shards are missing. Shards of different parameters are refused."""
    records = shard_records(directory)
    if not records:
        return None
    first = records[min(records)]
    for number, record in records.items():
        if _identity(record) != _identity(first):
            raise BertJaxError(f"{os.path.join(directory, record['name'])}: prepared with other "
                               f"parameters than {first['name']} ({difference(record, first)})")
    if len(records) < first["num_shards"]:
        return None
    manifest = dict(_identity(first), shards=[records[i] for i in range(first["num_shards"])])
    for key in ("documents", "sentences", "tokens", "characters"):
        manifest[key] = sum(r[key] for r in manifest["shards"])
    write_json(os.path.join(directory, MANIFEST), manifest)
    return manifest


def difference(a: dict, b: dict) -> str:
    """What differs between two shard records' identities, for a one-line refusal."""
    for key in ("format_version", "num_shards", "vocab_hash"):
        if a[key] != b[key]:
            return f"{key} {a[key]} vs {b[key]}"
    names = sorted(k for k in set(a["params"]) | set(b["params"])
                   if a["params"].get(k) != b["params"].get(k))
    return "; ".join(f"{k} {a['params'].get(k)!r} vs {b['params'].get(k)!r}" for k in names)


def is_prepared_set(path: str) -> bool:
    return os.path.isdir(path) and (os.path.isfile(os.path.join(path, MANIFEST))
                                    or bool(glob.glob(os.path.join(path, "shard-*-of-*"))))


def verify(directory: str) -> dict:
    """The manifest, after checking that every shard and part it lists is there, unchanged."""
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        records = shard_records(directory)
        if not records:
            raise BertJaxError(f"{directory}: not a prepared set (no {MANIFEST}, no shards); "
                               f"run `bert-jax prepare`")
        n = records[min(records)]["num_shards"]
        missing = [shard_dir_name(i, n) for i in range(n) if i not in records]
        # refuses mismatched shards with their names; writes the manifest if none is missing
        # (the last job was stopped between its shard and the manifest)
        if try_finish(directory) is None:
            raise BertJaxError(f"{directory}: shard {missing[0]} is missing ({len(missing)} of "
                               f"{n} missing); run `bert-jax prepare … --shard "
                               f"{int(missing[0][6:11])} --num-shards {n}`")
    manifest = read_json(path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BertJaxError(f"{path}: format_version {manifest.get('format_version')}, this "
                           f"version reads {FORMAT_VERSION}; prepare the set again")
    for entry in manifest["shards"]:
        shard = os.path.join(directory, entry["name"])
        record_path = os.path.join(shard, SHARD_RECORD)
        if not os.path.isfile(record_path):
            raise BertJaxError(f"{shard}: shard listed in {path} is missing")
        if read_json(record_path) != entry:
            raise BertJaxError(f"{record_path}: does not match {path} (the shard was prepared "
                               f"again with other inputs); prepare the set again")
        for part in entry["parts"]:
            file = os.path.join(shard, part["file"])
            size = os.path.getsize(file) if os.path.isfile(file) else None
            if size != part["bytes"]:
                raise BertJaxError(f"{file}: " + ("missing" if size is None else
                                   f"{size} bytes, {path} says {part['bytes']}"))
    return manifest


@dataclasses.dataclass
class PreparedSet:
    """A verified set, memory-mapped. Sentences are numbered in storage order (shards, then
    parts); tokens in one global space where sentence i is [starts[i], starts[i + 1]).

    Documents (`doc_first`, `doc_count`: their sentences) are in (source, number) order.
    """
    directory: str
    manifest: dict
    sentence_lengths: np.ndarray  # (S,) int32
    starts: np.ndarray  # (S + 1,) int64
    doc_first: np.ndarray  # (D,) int64, first sentence of each document
    doc_count: np.ndarray  # (D,) int64, its sentences
    doc_source: np.ndarray  # (D,) the source (manifest params.source_names) of each document
    doc_number: np.ndarray  # (D,) its number within the source
    _values: list  # per part: (T_p,) token ids, memory-mapped
    _part_base: np.ndarray  # (parts + 1,) int64, first global token of each part

    @classmethod
    def open(cls, directory: str) -> "PreparedSet":
        manifest = verify(directory)
        lengths, keys, values = [], [], []
        for entry in manifest["shards"]:
            for part in entry["parts"]:
                path = os.path.join(directory, entry["name"], part["file"])
                table = pa.ipc.open_file(pa.memory_map(path)).read_all()
                ids = table.column("ids").combine_chunks()  # one chunk: zero-copy
                offsets = ids.offsets.to_numpy()
                values.append(ids.values.to_numpy()[offsets[0]:offsets[-1]])
                lengths.append(np.diff(offsets).astype(np.int32))
                keys.append((table.column("source").to_numpy(), table.column("doc").to_numpy()))
        sentence_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
        starts = np.zeros(len(sentence_lengths) + 1, np.int64)
        np.cumsum(sentence_lengths, out=starts[1:])
        source = np.concatenate([s for s, _ in keys]) if keys else np.zeros(0, np.int32)
        doc = np.concatenate([d for _, d in keys]) if keys else np.zeros(0, np.int64)
        # a document is a run of sentences with one (source, doc); runs never interleave
        new = np.ones(len(doc), bool)
        new[1:] = (source[1:] != source[:-1]) | (doc[1:] != doc[:-1])
        first = np.flatnonzero(new)
        count = np.diff(np.append(first, len(doc)))
        order = np.lexsort((doc[first], source[first]))
        part_base = np.zeros(len(values) + 1, np.int64)
        np.cumsum([len(v) for v in values], out=part_base[1:])
        first, count = first[order].astype(np.int64), count[order].astype(np.int64)
        return cls(directory, manifest, sentence_lengths, starts, first, count, source[first],
                   doc[first], values, part_base)

    def document_name(self, index: int) -> str:
        """Document `index` for logs: its file, or its number within its source."""
        params, source = self.manifest["params"], int(self.doc_source[index])
        name = params["source_names"][source]
        whole_file = params["documents"] == "file" and params["source_kinds"][source] == "text"
        return name if whole_file else f"document {int(self.doc_number[index])} of {name}"

    @property
    def num_documents(self) -> int:
        return len(self.doc_first)

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Global tokens [start, stop) as int32 (a document may continue in the next part)."""
        part = int(np.searchsorted(self._part_base, start, side="right")) - 1
        pieces = []
        while start < stop:
            base, end = self._part_base[part], self._part_base[part + 1]
            take = min(stop, end)
            pieces.append(self._values[part][start - base:take - base])
            start, part = take, part + 1
        return np.concatenate(pieces).astype(np.int32) if pieces else np.zeros(0, np.int32)
