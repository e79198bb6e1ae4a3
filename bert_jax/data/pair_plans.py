"""Per-epoch plans of examples over sentence *lengths*: which tokens make each row, not the rows.

An epoch's examples are drawn from (seed, epoch), from the lengths alone, so a plan of a
gigabyte corpus is a few integer arrays; the tokens of a row are read (memory-mapped) only when
its batch is served (data/pretraining_batches.py).

Pairs (objective "mlm+nsp") follow google-research/bert's create_pretraining_data: segments A/B
fill a target length (short_seq_prob picks a shorter one), B is the real continuation half of
the time and otherwise comes from another document (the unused real sentences are put back),
and a pair longer than max_seq_length - 3 loses tokens from the front or back of its longer
segment. Deliberate differences, kept from earlier versions: the target length is drawn per
pair, not once per document (a book-sized document would otherwise be all-short or all-long),
and a chunk is closed only once it holds two sentences, so that B is the real continuation 50%
of the time (docs/fidelity.md). A corpus of one document works as the original: after ten
tries at another document, a random-next segment comes from the same one. Each epoch draws new
pairs: the original's dupe_factor, without writing the copies to disk.

Sentence-order pairs (objective "mlm+sop", ALBERT's SOP, Lan et al. 2019) are the same chunks
with B always the real continuation, and A and B swapped half the time (label 1 = swapped):
the task cannot be solved by telling topics apart, as NSP mostly is, only by reading both
segments' content in order. A chunk of one sentence (a document's last) makes no pair.

Packed rows (objective "mlm", RoBERTa's FULL-SENTENCES) cut one stream — documents in an
epoch-seeded order, each followed by [SEP] — into rows of max_seq_length - 2 tokens.
"""

from __future__ import annotations

import array
import dataclasses
import random
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class PairPlan:
    """Example i: tokens [a_start, a_stop) [SEP] [b_start, b_stop), in the set's global token
    space (data.prepared_set.PreparedSet.tokens); label 1 = B is random."""
    a_start: np.ndarray  # (N,) int64
    a_stop: np.ndarray
    b_start: np.ndarray
    b_stop: np.ndarray
    label: np.ndarray  # (N,) int8

    def __len__(self) -> int:
        return len(self.label)


def plan_pairs(documents: Sequence[range], lengths: np.ndarray, starts: np.ndarray,
               max_seq_length: int, short_seq_prob: float, seed: int, epoch: int,
               sentence_order: bool = False) -> PairPlan:
    """NSP pairs of one epoch (SOP pairs with sentence_order). documents: sentence ranges
    (global sentence numbers, each range consecutive); lengths (S,): tokens per sentence;
    starts (S + 1,): first token of each."""
    rng = random.Random(f"pairs-{seed}-{epoch}")
    length_list = lengths.tolist()  # Python ints: far faster to index in the loop below
    max_tokens = max_seq_length - 3
    rows = array.array("q")  # 7 int64 a pair (not tuples: 8 bytes a value at corpus scale)
    docs = [d for d in documents if len(d)]
    for index, document in enumerate(docs):
        _pairs_of_document(docs, index, length_list, max_tokens, short_seq_prob, rng, rows,
                           sentence_order)
    # a_start, a_end, b_start, b_end (sentences), label, a_cut, b_cut
    columns = np.frombuffer(rows, np.int64).reshape(-1, 7)
    starts = np.asarray(starts)
    a_cut, b_cut = columns[:, 5], columns[:, 6]  # packed (front << 32 | back) token cuts
    a0, a1 = starts[columns[:, 0]] + (a_cut >> 32), starts[columns[:, 1]] - (a_cut & 0xFFFFFFFF)
    b0, b1 = starts[columns[:, 2]] + (b_cut >> 32), starts[columns[:, 3]] - (b_cut & 0xFFFFFFFF)
    return PairPlan(a0, a1, b0, b1, columns[:, 4].astype(np.int8))


def _pairs_of_document(docs, index, lengths, max_tokens, short_seq_prob, rng, rows,
                       sentence_order=False):
    document = docs[index]
    first, end = document.start, document.stop
    target = _target_length(max_tokens, short_seq_prob, rng)
    chunk_start, chunk_length, i = first, 0, first
    while i < end:
        chunk_length += lengths[i]
        size = i + 1 - chunk_start
        # Close a chunk once it fills the target AND holds two sentences (module docstring)
        if i == end - 1 or (chunk_length >= target and size >= 2):
            a_end = chunk_start + (rng.randint(1, size - 1) if size >= 2 else 1)
            a_length = sum(lengths[chunk_start:a_end])
            if sentence_order:
                if size >= 2:
                    _append_ordered(rows, chunk_start, a_end, i + 1, lengths, max_tokens, rng)
            elif size == 1 or rng.random() < 0.5:
                label = 1
                target_b = target - a_length
                for _ in range(10):  # try to avoid the document itself
                    other = rng.randint(0, len(docs) - 1)
                    if other != index:
                        break
                random_document = docs[other]
                b_start = random_document.start + rng.randint(0, len(random_document) - 1)
                b_end, b_length = b_start, 0
                while b_end < random_document.stop:
                    b_length += lengths[b_end]
                    b_end += 1
                    if b_length >= target_b:
                        break
                i = a_end - 1  # put the unused real sentences back
            else:
                label = 0
                b_start, b_end = a_end, i + 1
                b_length = sum(lengths[a_end:i + 1])
            if not sentence_order:
                a_cut, b_cut = truncation(a_length, b_length, max_tokens, rng)
                rows.extend((chunk_start, a_end, b_start, b_end, label, a_cut, b_cut))
            chunk_start, chunk_length = i + 1, 0
            target = _target_length(max_tokens, short_seq_prob, rng)
        i += 1


def _append_ordered(rows, a_start, a_end, b_end, lengths, max_tokens, rng):
    """A sentence-order pair of sentences [a_start, a_end) and their continuation [a_end,
    b_end): in order (label 0) or swapped (label 1), each segment truncated as NSP's."""
    a_length, b_length = sum(lengths[a_start:a_end]), sum(lengths[a_end:b_end])
    a_cut, b_cut = truncation(a_length, b_length, max_tokens, rng)
    if rng.random() < 0.5:
        rows.extend((a_start, a_end, a_end, b_end, 0, a_cut, b_cut))
    else:
        rows.extend((a_end, b_end, a_start, a_end, 1, b_cut, a_cut))


def _target_length(max_tokens, short_seq_prob, rng):
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def truncation(a_length: int, b_length: int, max_tokens: int, rng: random.Random):
    """The original's truncate_seq_pair on lengths: trim the longer segment (B on ties), one
    token at a time from its front or back at random, until the pair fits. Returns the cuts of
    A and B, each packed as front << 32 | back."""
    cut = [[0, 0], [0, 0]]  # tokens removed from [front, back] of [A, B]
    length = [a_length, b_length]
    while length[0] + length[1] > max_tokens:
        which = 0 if length[0] > length[1] else 1
        cut[which][0 if rng.random() < 0.5 else 1] += 1
        length[which] -= 1
    return cut[0][0] << 32 | cut[0][1], cut[1][0] << 32 | cut[1][1]


@dataclasses.dataclass(frozen=True)
class PackPlan:
    """Row r is stream tokens [r·width, (r + 1)·width) of the documents in `order`, each
    followed by [SEP]; `stream_starts[k]` is where document order[k] begins in the stream."""
    order: np.ndarray  # (D,) document indices
    stream_starts: np.ndarray  # (D + 1,) int64
    width: int  # max_seq_length - 2 ([CLS] first, [SEP] last)

    def __len__(self) -> int:
        return -(-int(self.stream_starts[-1]) // self.width)


def plan_packed(doc_tokens: np.ndarray, max_seq_length: int, seed: int, epoch: int,
                shuffle: bool = True) -> PackPlan:
    """Packed rows of one epoch: documents (their token counts, (D,)) in an order drawn from
    (seed, epoch) — each epoch cuts the stream at new places — or as given (shuffle=False)."""
    n = len(doc_tokens)
    order = (np.random.default_rng([seed, epoch, 2]).permutation(n) if shuffle
             else np.arange(n))
    stream_starts = np.zeros(n + 1, np.int64)
    np.cumsum(np.asarray(doc_tokens, np.int64)[order] + 1, out=stream_starts[1:])
    return PackPlan(order, stream_starts, max_seq_length - 2)
