"""Text files → documents → sentences → next-sentence pairs → a cached `datasets.DatasetDict`.

Pairs follow google-research/bert's create_pretraining_data: segments A/B fill a target length
(short_seq_prob picks a shorter one), B is the real continuation half of the time and otherwise
comes from another document (the unused real sentences are put back), and a pair longer than
max_seq_length - 3 loses tokens from the front or back of its longer segment. One deliberate
difference: the target length is drawn per pair, not once per document, since a book-sized
document (one per file) would otherwise be all-short or all-long; and a chunk of sentences is
closed only once it holds two, so that B is the real continuation 50% of the time (the original
forces a random B whenever one sentence already fills the target, tilting the share toward
random; docs/fidelity.md has the figure). Masking is not done here: it is dynamic, in the train
step (data/masking.py).

The held-out split is by document, before pairs are made (data.heldout.split_heldout), and pairs
are made on each side separately: no held-out example shares a sentence, nor a random-next
segment, with training. A corpus of one document (one text file) works as in the original:
after ten tries at another document, a random-next segment comes from the same one.

Examples are padded to max_seq_length and cached on disk, keyed by file contents, vocabulary and
parameters, so a second run with the same inputs starts at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import shutil
from typing import Optional, Sequence, Union

import datasets
import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer
from tqdm.auto import tqdm

from bert_jax.data.heldout import split_heldout
from bert_jax.data.sentences import split_sentences
from bert_jax.data.text_files import read_text, resolve_files
from bert_jax.data.tokenizer import special_token_ids
from bert_jax.errors import BertJaxError

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2  # part of the cache key: bump whenever the examples made here change
DOCUMENT_MODES = ("file", "blank_line")

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")


def default_cache_dir() -> str:
    return os.path.join(os.getcwd(), ".cache", "bert_jax")


def build_pretraining_dataset(files: Union[str, Sequence[str]], tokenizer: Tokenizer, *,
                              max_seq_length: int = 128, short_seq_prob: float = 0.1,
                              dupe_factor: int = 1, seed: int = 0, documents: str = "file",
                              sentence_per_line: bool = False, eval_fraction: float = 0.0,
                              cache_dir: Optional[str] = None,
                              num_proc: Optional[int] = None) -> datasets.DatasetDict:
    """NSP examples from text files, built once and then loaded from `cache_dir`.

    Args:
      files: a glob pattern, a path or a list of them (UTF-8 text).
      tokenizer: a BERT tokenizer from bert_jax.tokenizer (load or train_tokenizer).
      documents: "file" — each file is one document; "blank_line" — a blank line ends one.
      sentence_per_line: True for the original format (one sentence a line); False for wrapped
        prose, where lines are joined and split at sentence ends.
      dupe_factor: passes over the corpus, each with different pairs (the original uses 10).
      eval_fraction: share of the corpus's sentences held out, by document (module docstring).
      num_proc: tokenizing processes; None picks from the CPU count and corpus size. Workers
        are forked: build before JAX starts its backend, or pass 1 (the Rust tokenizer still
        uses every core; only sentence splitting is then on one).
    Returns:
      A DatasetDict with splits "train" and "heldout" (0 rows when eval_fraction is 0), each
      with input_ids (int32), token_type_ids, attention_mask (int8), each of length
      max_seq_length and padded with [PAD] / 0, and next_sentence_labels (0 = B follows A,
      1 = B is random). Each split's `info.description` holds the build statistics as JSON.
    """
    _check_params(max_seq_length, short_seq_prob, dupe_factor, seed, documents, eval_fraction)
    paths = resolve_files(files)
    texts = [read_text(path) for path in paths]
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a private copy: no truncation/padding
    tokenizer.no_truncation()
    tokenizer.no_padding()
    specials = special_token_ids(tokenizer)
    params = dict(max_seq_length=max_seq_length, short_seq_prob=short_seq_prob,
                  dupe_factor=dupe_factor, seed=seed, documents=documents,
                  sentence_per_line=sentence_per_line, eval_fraction=eval_fraction,
                  format_version=FORMAT_VERSION)
    key = _cache_key(texts, tokenizer, params)
    path = os.path.join(cache_dir or default_cache_dir(), f"pretraining-{key}")
    if os.path.isdir(path):
        dataset = datasets.load_from_disk(path)
        logger.info("pretraining examples: loading the cache %s; %s", path,
                    json.loads(dataset["train"].info.description)["heldout"]["summary"])
        return dataset

    docs = tokenize_documents(texts, tokenizer, documents, sentence_per_line, num_proc, key)
    docs, labels, stats = _check_documents(docs, _document_labels(texts, paths, documents),
                                           paths, documents)
    stats.update(params=params, files=paths)
    _save_atomically(_build_splits(docs, labels, specials, params, stats), path)
    return datasets.load_from_disk(path)


def _build_splits(docs, labels, specials, params, stats) -> datasets.DatasetDict:
    """Documents → held-out split → pairs made on each side → padded examples."""
    fraction, seed = params["eval_fraction"], params["seed"]
    train, heldout, held = split_heldout(docs, fraction, seed)
    stats["heldout"] = held.stats(labels)
    (logger.warning if fraction and not held.sentences else logger.info)(
        "pretraining examples: %s", stats["heldout"]["summary"])
    splits = {}
    for name, documents in (("train", train), ("heldout", heldout)):
        instances = create_instances(documents, params["max_seq_length"],
                                     params["short_seq_prob"], params["dupe_factor"], seed)
        split_stats = dict(stats, split=name, split_documents=len(documents),
                           split_sentences=sum(map(len, documents)), examples=len(instances),
                           random_next=sum(r for _, _, r in instances))
        splits[name] = _to_dataset(instances, specials, params["max_seq_length"], split_stats)
        logger.info("pretraining examples, %s: %d from %d document(s), %.1f%% random next",
                    name, len(instances), len(documents),
                    100 * split_stats["random_next"] / max(1, len(instances)))
    return datasets.DatasetDict(splits)


def _save_atomically(dataset: datasets.DatasetDict, path: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    # an empty split needs one (empty) shard: with none, load_from_disk fails
    dataset.save_to_disk(tmp, num_shards={name: 1 for name, split in dataset.items()
                                          if not len(split)})
    try:
        os.replace(tmp, path)  # atomic: a concurrent or killed build never leaves half a cache
    except OSError:  # another process finished the same build first
        shutil.rmtree(tmp, ignore_errors=True)


def tokenize_documents(texts: list[str], tokenizer: Tokenizer, documents: str = "file",
                       sentence_per_line: bool = False, num_proc: Optional[int] = None,
                       fingerprint: Optional[str] = None) -> list[list[list[int]]]:
    """File texts → documents → sentences → token ids (no specials), in parallel processes."""
    doc_ids, paragraphs = [], []
    for file_index, text in enumerate(texts):
        for paragraph in _paragraphs(text):
            doc_ids.append(file_index if documents == "file" else len(paragraphs))
            paragraphs.append(paragraph)
    num_docs = len(texts) if documents == "file" else len(paragraphs)
    if num_proc is None:  # a process costs about a second to start: only worth it for big inputs
        num_proc = max(1, min(os.cpu_count() or 1, 8, len(paragraphs) // 2000))
    rows = datasets.Dataset.from_dict({"doc": doc_ids, "text": paragraphs})
    features = datasets.Features({"doc": datasets.Value("int64"),
                                  "ids": datasets.Sequence(datasets.Value("int32"))})
    sentences = rows.map(_tokenize_paragraphs, batched=True,  # num_proc=1 would still fork a pool
                         num_proc=num_proc if num_proc > 1 else None,
                         remove_columns=["doc", "text"], features=features,
                         fn_kwargs=dict(tokenizer=tokenizer, sentence_per_line=sentence_per_line),
                         new_fingerprint=f"{fingerprint or 'nocache'}-sentences",
                         desc="tokenizing")
    table = sentences.with_format("arrow")[:]  # whole columns: far faster than row iteration
    grouped: list[list[list[int]]] = [[] for _ in range(num_docs)]
    for doc, ids in zip(table.column("doc").to_pylist(), table.column("ids").to_pylist()):
        if ids:  # a sentence of only control characters has no tokens
            grouped[doc].append(ids)
    return grouped


def _paragraphs(text: str) -> list[str]:  # blocks between blank lines, not just whitespace
    return [p for p in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n")) if p.strip()]


def _document_labels(texts, paths, documents) -> list[str]:
    """Names for the documents tokenize_documents makes, in its order, for the logs."""
    if documents == "file":
        return list(paths)
    return [f"paragraph {number} of {path}" for text, path in zip(texts, paths)
            for number in range(1, len(_paragraphs(text)) + 1)]


def _tokenize_paragraphs(batch, tokenizer, sentence_per_line):
    docs, sentences = [], []
    for doc, paragraph in zip(batch["doc"], batch["text"]):
        for sentence in split_sentences(paragraph, sentence_per_line):
            docs.append(doc)
            sentences.append(sentence)
    encodings = tokenizer.encode_batch(sentences, add_special_tokens=False)
    return {"doc": docs, "ids": [e.ids for e in encodings]}


def create_instances(documents: list[list[list[int]]], max_seq_length: int,
                     short_seq_prob: float, dupe_factor: int,
                     seed: int) -> list[tuple[list[int], list[int], int]]:
    """Documents (lists of tokenized sentences) → shuffled (tokens_a, tokens_b, is_random_next).

    Deterministic in `seed`. As in the original, a random-next segment comes from the same
    document when ten draws found no other (always, for a single document).
    """
    rng = random.Random(seed)
    documents = list(documents)
    rng.shuffle(documents)
    instances = []
    with tqdm(total=dupe_factor * sum(map(len, documents)), desc="sentence pairs",
              unit="sentence", disable=None) as bar:
        for _ in range(dupe_factor):
            for index, document in enumerate(documents):
                instances.extend(_instances_from_document(documents, index, max_seq_length - 3,
                                                          short_seq_prob, rng))
                bar.update(len(document))
    rng.shuffle(instances)
    return instances


def _instances_from_document(documents, index, max_num_tokens, short_seq_prob, rng):
    document = documents[index]
    instances = []
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        # Close a chunk once it fills the target AND holds two sentences (see module docstring)
        if i == len(document) - 1 or (chunk_length >= target and len(chunk) >= 2):
            # a_end: how many of the chunk's sentences form segment A
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random_next = 1
                target_b = target - len(tokens_a)
                for _ in range(10):  # try to avoid the document itself
                    other = rng.randint(0, len(documents) - 1)
                    if other != index:
                        break
                random_document = documents[other]
                tokens_b = []
                for sentence in random_document[rng.randint(0, len(random_document) - 1):]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b:
                        break
                i -= len(chunk) - a_end  # put the unused real sentences back
            else:
                is_random_next = 0
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append((tokens_a, tokens_b, is_random_next))
            chunk, chunk_length = [], 0
            target = _target_length(max_num_tokens, short_seq_prob, rng)
        i += 1
    return instances


def _target_length(max_num_tokens, short_seq_prob, rng):
    return rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens


def truncate_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng: random.Random):
    """Trim the longer segment (B on ties), one token at a time from its front or back at
    random, until the pair fits: the original's truncate_seq_pair, without quadratic deletes."""
    cut = [[0, 0], [0, 0]]  # tokens removed from [front, back] of [A, B]
    length = [len(tokens_a), len(tokens_b)]
    while length[0] + length[1] > max_num_tokens:
        which = 0 if length[0] > length[1] else 1
        cut[which][0 if rng.random() < 0.5 else 1] += 1
        length[which] -= 1
    (a_front, a_back), (b_front, b_back) = cut
    return (tokens_a[a_front:len(tokens_a) - a_back], tokens_b[b_front:len(tokens_b) - b_back])


def _check_documents(docs, labels, paths, documents):
    """Drop empty documents; report (not silently) short ones and how documents were formed."""
    where = paths[0] if len(paths) == 1 else f"{len(paths)} files ({paths[0]}, …)"
    empty = sum(1 for d in docs if not d)
    kept, labels = [d for d in docs if d], [name for d, name in zip(docs, labels) if d]
    single = sum(1 for d in kept if len(d) == 1)
    if empty:
        logger.warning("%s: %d of %d documents have no tokens and are skipped", where, empty,
                       len(docs))
    if not kept:
        raise BertJaxError(f"{where}: no text to make examples of (no tokens)")
    if single == len(kept):
        raise BertJaxError(f"{where}: every document is a single sentence, too short to make "
                           f"a real next-sentence pair")
    if single:
        logger.warning("%s: %d of %d documents are too short to pair (one sentence): they give "
                       "only random-next examples", where, single, len(kept))
    how = (f"{labels[0]} as one document" if len(kept) == 1 and documents == "file" else
           "one per file" if documents == "file" else f"split at blank lines in {where}")
    same = ": random-next segments come from elsewhere in the same document" * (len(kept) == 1)
    logger.info("pretraining examples: %d document%s (%s)%s", len(kept),
                "s" * (len(kept) != 1), how, same)
    stats = dict(documents=len(kept), empty_documents=empty, single_sentence_documents=single,
                 sentences=sum(map(len, kept)), tokens=sum(len(s) for d in kept for s in d))
    return kept, labels, stats


def _to_dataset(instances, specials, max_seq_length, stats) -> datasets.Dataset:
    n, length = len(instances), max_seq_length
    input_ids = np.full((n, length), specials["[PAD]"], dtype=np.int32)  # (N, L)
    token_type_ids = np.zeros((n, length), dtype=np.int8)  # (N, L)
    attention_mask = np.zeros((n, length), dtype=np.int8)  # (N, L)
    cls, sep = specials["[CLS]"], specials["[SEP]"]
    for row, (tokens_a, tokens_b, _) in enumerate(instances):
        tokens = [cls, *tokens_a, sep, *tokens_b, sep]
        input_ids[row, :len(tokens)] = tokens
        token_type_ids[row, len(tokens_a) + 2:len(tokens)] = 1
        attention_mask[row, :len(tokens)] = 1
    labels = np.array([r for _, _, r in instances], dtype=np.int32)  # (N,)
    features = datasets.Features({
        "input_ids": datasets.Sequence(datasets.Value("int32"), length=length),
        "token_type_ids": datasets.Sequence(datasets.Value("int8"), length=length),
        "attention_mask": datasets.Sequence(datasets.Value("int8"), length=length),
        "next_sentence_labels": datasets.Value("int32")})
    info = datasets.DatasetInfo(description=json.dumps(stats), features=features)
    return datasets.Dataset.from_dict(
        {"input_ids": _fixed_rows(input_ids), "token_type_ids": _fixed_rows(token_type_ids),
         "attention_mask": _fixed_rows(attention_mask), "next_sentence_labels": pa.array(labels)},
        features=features, info=info)


def _fixed_rows(array: np.ndarray) -> pa.Array:
    """(N, L) numpy → Arrow fixed-size lists without a trip through Python lists."""
    return pa.FixedSizeListArray.from_arrays(pa.array(array.reshape(-1)), array.shape[1])


def _cache_key(texts, tokenizer, params) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for text in texts:  # contents, in order (order decides document ids), not paths or mtimes
        digest.update(hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest())
    digest.update(tokenizer.to_str().encode("utf-8"))
    digest.update(json.dumps(params, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()


def _check_params(max_seq_length, short_seq_prob, dupe_factor, seed, documents, eval_fraction):
    def whole(value, minimum):
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

    for name, value, ok, expected in (
            ("max_seq_length", max_seq_length, whole(max_seq_length, 5), "an integer ≥ 5"),
            ("short_seq_prob", short_seq_prob, isinstance(short_seq_prob, (int, float))
             and 0.0 <= short_seq_prob <= 1.0, "a probability in [0, 1]"),
            ("dupe_factor", dupe_factor, whole(dupe_factor, 1), "an integer ≥ 1"),
            ("seed", seed, whole(seed, 0), "an integer ≥ 0"),
            ("documents", documents, documents in DOCUMENT_MODES, " or ".join(DOCUMENT_MODES)),
            ("eval_fraction", eval_fraction, isinstance(eval_fraction, (int, float))
             and 0.0 <= eval_fraction < 1.0, "a fraction in [0, 1)")):
        if not ok:
            raise BertJaxError(f"{name}: expected {expected}, got {value!r}")
