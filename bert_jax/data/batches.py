"""Host batches: the batch for step s is a pure function of (seed, s).

Epoch e = s // steps_per_epoch is a permutation of example indices seeded by (seed, e); step s
takes the next `batch_size` indices of it (the ragged tail of an epoch is dropped, so shapes
never change). Resuming therefore needs only the step. With several hosts, every process calls
with the same global `batch_size`, seed and step and its own `process_index` / `process_count`:
it gets rows [p·B/P, (p+1)·B/P) of the global batch, and the P slices make the global batch.
"""

from __future__ import annotations

import functools
from typing import Iterator, Mapping, Union

import datasets
import numpy as np
import pyarrow as pa

from bert_jax.data import buckets
from bert_jax.errors import BertJaxError

Data = Union[datasets.Dataset, Mapping[str, np.ndarray]]


def as_arrays(dataset: datasets.Dataset) -> dict[str, np.ndarray]:
    """All columns as numpy arrays in memory: faster batches than reading Arrow every step.
    Integer columns come back as int32, as batch_for_step serves them.

    Read from Arrow directly so that an empty split (an empty held-out set) keeps its (0, L)
    shapes and integer dtypes: datasets' numpy format makes those (0,) float arrays.
    """
    table = dataset.with_format("arrow")[:]
    arrays = {name: _numpy(table.column(name).combine_chunks()) for name in table.column_names}
    return {name: values.astype(np.int32) if np.issubdtype(values.dtype, np.integer) else values
            for name, values in arrays.items()}


def _numpy(array: pa.Array) -> np.ndarray:
    if pa.types.is_fixed_size_list(array.type):  # (N, L, …) from the flat values
        values = _numpy(array.flatten())
        return values.reshape((len(array), array.type.list_size) + values.shape[1:])
    return array.to_numpy(zero_copy_only=False)


def num_examples(data: Data) -> int:
    if isinstance(data, datasets.Dataset):
        return len(data)
    return len(next(iter(data.values())))


def steps_per_epoch(data: Data, batch_size: int) -> int:
    n = num_examples(data)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BertJaxError(f"batch_size: expected an integer ≥ 1, got {batch_size!r}")
    if batch_size > n:
        raise BertJaxError(f"batch_size: {batch_size} is larger than the {n} examples")
    return n // batch_size


@functools.lru_cache(maxsize=4)
def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """(n,) example indices in the order epoch `epoch` visits them."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batch_indices(n: int, step: int, batch_size: int, seed: int, process_index: int = 0,
                  process_count: int = 1) -> np.ndarray:
    """(batch_size / process_count,) example indices this process serves at `step`."""
    if not isinstance(seed, int) or seed < 0:
        raise BertJaxError(f"seed: expected an integer ≥ 0, got {seed!r}")
    if not isinstance(step, (int, np.integer)) or step < 0:
        raise BertJaxError(f"step: expected an integer ≥ 0, got {step!r}")
    if batch_size % process_count or not 0 <= process_index < process_count:
        raise BertJaxError(f"batch_size: {batch_size} does not split into {process_count} "
                           f"processes (process_index {process_index})")
    per_epoch = n // batch_size
    if per_epoch == 0:
        raise BertJaxError(f"batch_size: {batch_size} is larger than the {n} examples")
    epoch, within = divmod(int(step), per_epoch)
    local = batch_size // process_count
    start = within * batch_size + process_index * local
    return epoch_permutation(n, seed, epoch)[start:start + local]


def batch_for_step(data: Data, step: int, batch_size: int, seed: int, *, process_index: int = 0,
                   process_count: int = 1) -> dict[str, np.ndarray]:
    """The (slice of the) global batch for `step`: every column, rows in permutation order.

    `data` is a Dataset of fixed-length, padded examples (classification data) or the
    dict from `as_arrays`. Integer columns come back as int32: (B/P, L) sequences, (B/P,) labels.
    """
    indices = batch_indices(num_examples(data), step, batch_size, seed, process_index,
                            process_count)
    if isinstance(data, datasets.Dataset):
        # Arrow reads sorted indices fastest; put the rows back in permutation order after
        order = np.argsort(indices)
        rows = data.with_format("numpy")[indices[order]]
        inverse = np.argsort(order)
        columns = {name: np.asarray(values)[inverse] for name, values in rows.items()}
    else:
        columns = {name: np.asarray(values)[indices] for name, values in data.items()}
    return {name: values.astype(np.int32) if np.issubdtype(values.dtype, np.integer) else values
            for name, values in columns.items()}


def row_lengths(data: Mapping[str, np.ndarray]) -> np.ndarray:
    """(N,) real tokens of each example (multiple choice: of its longest choice)."""
    mask = np.asarray(data["attention_mask"])
    lengths = mask.sum(-1)
    return lengths.reshape(len(mask), -1).max(1) if lengths.ndim > 1 else lengths


def trimmed_length(lengths: np.ndarray, step: int, batch_size: int, seed: int,
                   max_seq_length: int) -> int:
    """The bucket (data/buckets.bucket_length) of the longest row in the *global* batch of
    `step`: every process computes the same length from the same `lengths`, so the slices
    they serve make one global array."""
    rows = batch_indices(len(lengths), step, batch_size, seed)
    return buckets.bucket_length(int(lengths[rows].max()), max_seq_length)


def cut_to(batch: dict, length: int) -> dict:
    """Every per-position column (the sequence axis last, as input_ids') cut to `length`
    positions; per-row columns (labels of a class, answer positions) kept. numpy arrays or
    torch tensors (the transformers baseline cuts its batches with this too)."""
    full = batch["input_ids"].shape[-1]
    return {name: values[..., :length] if values.ndim >= 2 and values.shape[-1] == full
            and values.shape[:-1] == batch["input_ids"].shape[:-1] else values
            for name, values in batch.items()}


def iterate_batches(data: Data, batch_size: int, seed: int, *, start_step: int = 0,
                    process_index: int = 0, process_count: int = 1
                    ) -> Iterator[dict[str, np.ndarray]]:
    """batch_for_step(data, s, …) for s = start_step, start_step + 1, … (endless)."""
    step = start_step
    while True:
        yield batch_for_step(data, step, batch_size, seed, process_index=process_index,
                             process_count=process_count)
        step += 1


def eval_batches(data: Mapping[str, np.ndarray], batch_size: int
                 ) -> Iterator[tuple[dict[str, np.ndarray], int]]:
    """Every row once, in order: (batch, number of real rows). The last batch is padded to
    `batch_size` by repeating its final row, so shapes never change; drop the padding after."""
    n = num_examples(data)
    for start in range(0, n, batch_size):
        rows = np.arange(start, start + batch_size).clip(max=n - 1)
        yield {k: np.asarray(v)[rows] for k, v in data.items()}, min(batch_size, n - start)
