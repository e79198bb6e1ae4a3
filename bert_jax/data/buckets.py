"""Length buckets for inference: rows sorted by their real length and batched so that a batch
is padded only to its bucket, not to max_seq_length, and results put back in input order.

Bucket lengths are few because each is a compiled shape (tracing and compiling take about a
second for MiniLM, two for BERT-base): a length is rounded up to a multiple of 16, and above
128 to a multiple of an eighth of the next power of two (160, 192, … 256, 320, … 512), so a row
carries at most 15 padding tokens up to 128 and under a quarter of its length beyond;
max_seq_length 128 has at most 8 shapes, 512 at most 16. A bucket that few batches would use is
merged into a longer one (`merged`): its compile would cost more than the padding it saves."""

from __future__ import annotations

from typing import Iterator

import jax
import numpy as np

from bert_jax.errors import BertJaxError

STEP = 16  # the finest bucket step: a multiple of 8 keeps the matmuls' rows vector-aligned
# what a compile costs, in positions run: one batch of 32 × 128 (see `merged`)
COMPILE_POSITIONS = 32 * 128


def bucket_length(n: int, max_seq_length: int) -> int:
    """n rounded up to its bucket (see the module docstring), at most max_seq_length."""
    n = max(int(n), 1)
    octave = 1 << (n - 1).bit_length()  # the power of two ≥ n
    step = max(STEP, octave // 8)  # 16 up to 128, then 32 up to 256, 64 up to 512, …
    return min(-(-n // step) * step, max_seq_length)


def plan(lengths: np.ndarray, batch_size: int,
         max_seq_length: int) -> Iterator[tuple[np.ndarray, int, int]]:
    """(rows, n, length) per batch: the input indices of a batch's rows, shortest texts first,
    padded to `batch_size` by repeating the last (so the batch dimension never changes); n of
    them real; every row's real tokens fit in `length`, the bucket of the batch's longest."""
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    chunks = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    buckets = merged([bucket_length(lengths[rows].max(), max_seq_length) for rows in chunks],
                     COMPILE_POSITIONS / batch_size)
    for rows, length in zip(chunks, buckets):
        n = len(rows)
        yield np.concatenate([rows, np.repeat(rows[-1:], batch_size - n)]), n, length


def merged(buckets: list[int], compile_cost: float) -> list[int]:
    """Each batch's bucket (non-decreasing), some moved up to the next longer one kept, so that
    the batches' lengths summed plus `compile_cost` per distinct bucket are least.

    `plan` charges a compile as one batch of 32 × 128 positions: tracing and compiling MiniLM
    take as long as 2.3 such batches on 2 cores, BERT-base 0.6 (so base merges a little more
    than it should, MiniLM less). Exact by dynamic programming over the distinct lengths."""
    lengths = sorted(set(buckets))
    counts = [buckets.count(b) for b in lengths]
    best, keep = [0.0], [-1]  # cost of the batches up to lengths[t - 1] with it kept
    for t in range(1, len(lengths) + 1):
        options = [(best[s] + compile_cost + lengths[t - 1] * sum(counts[s:t]), s)
                   for s in range(t)]
        cost, s = min(options)
        best.append(cost)
        keep.append(s)
    kept, t = [], len(lengths)
    while t > 0:
        kept.append(lengths[t - 1])
        t = keep[t]
    return [min(k for k in kept if k >= b) for b in buckets]


def run(fn, arrays: dict, batch_size: int, per_position: bool = False):
    """fn(batch) over every row of `arrays` ((N, max_seq_length) right-padded token arrays with an
    attention_mask), a batch cut to its bucket (`plan`), so padding is not computed; results
    in input order. fn may return a tuple of arrays: so does this. With per_position, fn's
    outputs are (B, length, …) and come back (N, max_seq_length, …), zeros past `length`."""
    lengths = np.asarray(arrays["attention_mask"]).sum(1)
    if lengths.size == 0:
        raise BertJaxError("texts: expected at least one text, got none")
    full = np.shape(arrays["attention_mask"])[1]
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    results = ((fn({k: v[rows, :length] for k, v in arrays.items()}), rows[:n])
               for rows, n, length in plan(lengths, batch_size, full))
    out = None
    for result, rows in overlapped(results):
        if out is None:
            out = jax.tree.map(lambda x: np.zeros((len(lengths),) + (
                (full,) + x.shape[2:] if per_position else x.shape[1:]), x.dtype), result)
        for o, x in zip(jax.tree.leaves(out), jax.tree.leaves(result)):
            o[(rows, slice(x.shape[1])) if per_position else rows] = x[:len(rows)]
    return out


def overlapped(results):
    """(host result, tag) for each (device result, tag) of `results`, the next batch taken (its
    computation dispatched) before the previous result is copied to the host: the host's
    slicing and copying overlap the device's work instead of waiting for it."""
    pending = None
    for result, tag in results:
        if pending is not None:
            yield jax.tree.map(np.asarray, pending[0]), pending[1]
        pending = result, tag
    if pending is not None:
        yield jax.tree.map(np.asarray, pending[0]), pending[1]
