"""Tokenising a corpus: text sources → sentences → token ids → a prepared set's Arrow parts
(data/prepared_set.py).

Text is read a paragraph at a time (data/text_sources.py) and tokenised in chunks of about a
megabyte, by the Rust tokenizer's batch encoder, in worker processes or in this one. Memory is
bounded by the part size (`part_tokens`) and the chunks in flight, not by the corpus. Job I of N
(`shard`, `num_shards`) prepares sources I, I+N, … (records r ≡ I mod N of a `datasets` stream)
into DIR/shard-I-of-N, so any scheduler runs the jobs on any machines with no coordinator; the
last one to finish writes the manifest.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import time
from collections import deque
from typing import Iterator, Optional, Sequence

import numpy as np
from tokenizers import Tokenizer
from tqdm.auto import tqdm

from bert_jax.data import prepared_set, text_sources
from bert_jax.data.sentences import split_sentences
from bert_jax.errors import BertJaxError

log = logging.getLogger(__name__)

DOCUMENT_MODES = ("file", "blank_line")
CHUNK_CHARS = 1 << 20  # text per tokenising task: large enough to amortise the hand-off
PART_TOKENS = 1 << 24  # tokens per part file (32 MB of uint16): the memory bound of a job


def tokenize_shard(sources: Sequence[text_sources.Source], tokenizer: Tokenizer, out: str, *,
                   documents: str = "file", sentence_per_line: bool = False,
                   text_field: str = "text",
                   shard: int = 0, num_shards: int = 1, workers: int = 0,
                   part_tokens: int = PART_TOKENS) -> Optional[dict]:
    """Tokenise shard `shard` of `num_shards` of `sources` (all of them, in order) into `out`.

    workers: tokenising processes; 0 tokenises here (the Rust encoder still uses every core).
    Returns the manifest when this job completed the set, else None. A finished shard is not
    prepared again; one of other parameters in `out` is refused.
    """
    if documents not in DOCUMENT_MODES:
        raise BertJaxError(f"documents: expected {' or '.join(DOCUMENT_MODES)}, got "
                           f"{documents!r}")
    if not isinstance(workers, int) or workers < 0:
        raise BertJaxError(f"workers: expected an integer ≥ 0, got {workers!r}")
    sources = list(sources)
    mine = text_sources.shard_sources(sources, shard, num_shards)
    if any(s.kind == "dataset" for s in sources):  # split by record (iter_paragraphs), not here
        mine = sources
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a private copy: no truncation/padding
    tokenizer.no_truncation()
    tokenizer.no_padding()
    params = dict(documents=documents, sentence_per_line=sentence_per_line,
                  text_field=text_field, sources=len(sources),
                  source_names=[s.name for s in sources],
                  source_kinds=[s.kind for s in sources])
    identity = dict(format_version=prepared_set.FORMAT_VERSION, num_shards=num_shards,
                    vocab_hash=prepared_set.vocab_hash(tokenizer), params=params)
    name = prepared_set.shard_dir_name(shard, num_shards)
    final = os.path.join(out, name)
    existing = prepared_set.shard_records(out)
    other = next(iter(existing.values()), None)
    if other is not None and {k: other[k] for k in identity} != identity:
        raise BertJaxError(f"{os.path.join(out, other['name'])}: prepared with other "
                           f"parameters than this job (the shard's vs this job's: "
                           f"{prepared_set.difference(other, identity)}); use another --out")
    if shard in existing:
        log.info("%s: already prepared", final)
        return prepared_set.try_finish(out)
    created = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    tmp = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        stats = _write_shard(mine, tokenizer, tmp, documents, sentence_per_line, text_field,
                             shard, num_shards, workers, part_tokens)
        record = dict(identity, name=name, **stats)
        prepared_set.write_json(os.path.join(tmp, prepared_set.SHARD_RECORD), record)
        _save_vocab(tokenizer, out)  # with a shard only: a failed job changes nothing in `out`
        try:
            os.rename(tmp, final)
        except OSError:  # another job prepared the same shard first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:  # and still empty: the other shards' jobs may be writing into it
            with contextlib.suppress(OSError):
                os.rmdir(out)
        raise
    return prepared_set.try_finish(out)


def _save_vocab(tokenizer: Tokenizer, out: str) -> None:
    """DIR/vocab/tokenizer.json, so that a run on the set needs no other vocabulary."""
    directory = os.path.join(out, prepared_set.VOCAB)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "tokenizer.json")
    tmp = f"{path}.tmp-{os.getpid()}"
    tokenizer.save(tmp)
    os.replace(tmp, path)


class _Progress:
    """Characters read (not bytes: a UTF-8 count per paragraph would cost a copy), and a bar."""

    def __init__(self, bar):
        self.bar, self.n = bar, 0

    def update(self, size: int) -> None:
        self.n += size
        self.bar.update(size)


def _chunks(sources, documents, text_field, shard, num_shards, counter) -> Iterator[tuple]:
    """(sources, document numbers, paragraphs) of about CHUNK_CHARS of text each."""
    keys, docs, texts, size = [], [], [], 0
    for source in sources:
        for doc, paragraph in text_sources.iter_paragraphs(
                source, documents=documents, text_field=text_field, shard=shard,
                num_shards=num_shards):
            keys.append(source.index)
            docs.append(doc)
            texts.append(paragraph)
            size += len(paragraph)
            if size >= CHUNK_CHARS:
                counter.update(size)
                yield keys, docs, texts
                keys, docs, texts, size = [], [], [], 0
    if texts:
        counter.update(size)
        yield keys, docs, texts


_WORKER_TOKENIZER = None


def _init_worker(tokenizer_json: str) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = Tokenizer.from_str(tokenizer_json)


def tokenize_chunk(chunk, tokenizer=None, sentence_per_line=False):
    """Paragraphs → sentences → ids: (source (n,), doc (n,), lengths (n,), ids (Σ lengths,)).

    Sentences with no tokens (only control characters) are dropped."""
    tokenizer = tokenizer or _WORKER_TOKENIZER
    keys, docs, texts = chunk
    sentence_keys, sentence_docs, sentences = [], [], []
    for key, doc, paragraph in zip(keys, docs, texts):
        for sentence in split_sentences(paragraph, sentence_per_line):
            sentence_keys.append(key)
            sentence_docs.append(doc)
            sentences.append(sentence)
    encodings = tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
    ids = [e.ids for e in encodings]
    lengths = np.fromiter(map(len, ids), np.int32, len(ids))
    keep = lengths > 0
    flat = np.fromiter((i for row in ids for i in row), np.int32, int(lengths.sum()))
    return (np.asarray(sentence_keys, np.int32)[keep], np.asarray(sentence_docs, np.int64)[keep],
            lengths[keep], flat)


def _tokenized(chunks, tokenizer, sentence_per_line, workers) -> Iterator[tuple]:
    """tokenize_chunk over `chunks`, in order; with workers, a bounded window in flight."""
    if workers == 0:
        for chunk in chunks:
            yield tokenize_chunk(chunk, tokenizer, sentence_per_line)
        return
    # spawn, not fork: the caller may already run JAX's (or the tokenizer's) threads
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, _init_worker, (tokenizer.to_str(),)) as pool:
        pending = deque()
        for chunk in chunks:
            pending.append(pool.apply_async(tokenize_chunk, (chunk, None, sentence_per_line)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


class _PartWriter:
    """Buffers tokenised sentences and writes a part file each `part_tokens` tokens."""

    def __init__(self, directory: str, id_type, part_tokens: int):
        self.directory, self.id_type, self.part_tokens = directory, id_type, part_tokens
        self.buffer, self.buffered, self.parts = [], 0, []

    def add(self, item) -> None:
        self.buffer.append(item)
        self.buffered += len(item[3])
        if self.buffered >= self.part_tokens:
            self.flush()

    def flush(self) -> None:
        if not self.buffered:
            return
        columns = [np.concatenate([item[i] for item in self.buffer]) for i in range(4)]
        path = os.path.join(self.directory, f"part-{len(self.parts):05d}.arrow")
        self.parts.append(prepared_set.write_part(path, *columns, self.id_type))
        self.buffer, self.buffered = [], 0


def _write_shard(sources, tokenizer, directory, documents, sentence_per_line, text_field,
                 shard, num_shards, workers, part_tokens) -> dict:
    id_type = prepared_set.token_type(tokenizer.get_vocab_size(with_added_tokens=True))
    writer = _PartWriter(directory, id_type, part_tokens)
    started = time.time()
    documents_seen, last = 0, None
    with tqdm(desc=f"preparing shard {shard} of {num_shards}", unit="char", unit_scale=True,
              disable=None) as bar:
        progress = _Progress(bar)
        chunks = _chunks(sources, documents, text_field, shard, num_shards, progress)
        for item in _tokenized(chunks, tokenizer, sentence_per_line, workers):
            keys, docs = item[0], item[1]
            if len(keys):
                new = np.ones(len(keys), bool)
                new[1:] = (keys[1:] != keys[:-1]) | (docs[1:] != docs[:-1])
                new[0] = last != (keys[0], docs[0])
                documents_seen += int(new.sum())
                last = (keys[-1], docs[-1])
            writer.add(item)
        writer.flush()
        characters = progress.n
    seconds = time.time() - started
    stats = dict(parts=writer.parts, documents=documents_seen,
                 sentences=sum(p["sentences"] for p in writer.parts),
                 tokens=sum(p["tokens"] for p in writer.parts), characters=characters,
                 source_files=[s.name for s in sources])
    log.info("shard %d of %d: %d documents, %d sentences, %d tokens from %.1f M characters in "
             "%.1f s (%.2f M/s)", shard, num_shards, stats["documents"], stats["sentences"],
             stats["tokens"], characters / 1e6, seconds, characters / 1e6 / max(seconds, 1e-9))
    return stats
