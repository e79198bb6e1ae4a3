"""Labelled text → fixed-shape classification examples: files or a `datasets` hub name in,
(input_ids, token_type_ids, attention_mask, labels) numpy columns and the label map out.

Local files: csv, tsv, json, jsonl, parquet (and txt, one text a line, for inference). Bad input
is refused in one line naming the file and column; rows with an empty text or label are dropped
with a counted warning, so every metric covers exactly the rows it says.
"""

from __future__ import annotations

import logging
import os
from typing import Optional, Sequence

import datasets
import numpy as np

from bert_jax.data import text_files, tokenizer
from bert_jax.errors import BertJaxError

log = logging.getLogger(__name__)

_BUILDERS = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"}), ".json": ("json", {}),
             ".jsonl": ("json", {}), ".parquet": ("parquet", {})}


def read_table(path: str) -> datasets.Dataset:
    """One local file as a Dataset; a .txt file gives one row per non-empty line, column text."""
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: file not found")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".txt":
        lines = [line for line in text_files.read_utf8(path).split("\n") if line.strip()]
        table = datasets.Dataset.from_dict({"text": lines})
    elif ext in _BUILDERS:
        builder, options = _BUILDERS[ext]
        if os.path.getsize(path) == 0:
            raise BertJaxError(f"{path}: empty file")
        if ext != ".parquet":
            text_files.read_utf8(path)  # pandas' decode error names no file and no offset
        quiet = datasets.utils.are_progress_bars_disabled()
        verbosity = datasets.logging.get_verbosity()
        datasets.disable_progress_bars()  # one small local file: no "Generating split" bars
        datasets.logging.set_verbosity(logging.CRITICAL)  # its parse errors come back below
        try:
            table = datasets.load_dataset(builder, data_files={"rows": path}, split="rows",
                                          **options)
        except Exception as e:  # pandas / arrow parse errors of many kinds
            if "corresponds to no data" in str(e):  # a header and no rows
                raise BertJaxError(f"{path}: no rows") from None
            raise BertJaxError(f"{path}: could not read as {ext[1:]} ({_root_cause(e)})"
                               ) from None
        finally:
            datasets.logging.set_verbosity(verbosity)
            if not quiet:
                datasets.enable_progress_bars()
    else:
        raise BertJaxError(f"{path}: unknown file type {ext or '(none)'}; expected one of "
                           f"{', '.join(sorted(_BUILDERS))} or .txt")
    if len(table) == 0:
        raise BertJaxError(f"{path}: no rows")
    return table


def _root_cause(error: BaseException) -> str:
    """First line of the innermost exception: `datasets` wraps the parser's own message (the
    line and field counts) in a generic "An error occurred while generating the dataset"."""
    while error.__cause__ or error.__context__:
        error = error.__cause__ or error.__context__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def load_splits(dataset: str = "", dataset_config: str = "", files: Optional[dict] = None
                ) -> dict[str, tuple[str, datasets.Dataset]]:
    """{split: (name for messages, Dataset)} from a hub dataset or {split: path} local files."""
    if dataset:
        try:
            loaded = datasets.load_dataset(dataset, dataset_config or None)
        except Exception as e:
            raise BertJaxError(f"dataset {dataset} {dataset_config}: could not load "
                               f"({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                               ) from None
        return {split: (f"{dataset}/{split}", loaded[split]) for split in files or loaded
                if split in loaded}
    return {split: (path, read_table(path)) for split, path in (files or {}).items() if path}


def check_columns(table: datasets.Dataset, where: str, columns: Sequence[str]) -> None:
    for column in columns:
        if column not in table.column_names:
            raise BertJaxError(f"{where}: no column {column!r}; columns present: "
                               f"{', '.join(table.column_names)}")


def texts_of(table: datasets.Dataset, column: str, where: str) -> list[str]:
    """A text column as strings; nulls are an error here (inference must keep every row)."""
    values = table[column]
    empty = [i for i, v in enumerate(values) if v is None]
    if empty:
        raise BertJaxError(f"{where}: column {column!r} is empty in {len(empty)} row(s), first "
                           f"at row {empty[0] + 1}")
    return [v if isinstance(v, str) else str(v) for v in values]


def drop_empty(table: datasets.Dataset, where: str, columns: Sequence[str]) -> datasets.Dataset:
    """Rows with a null in any of `columns` removed, with one warning that counts them."""
    keep = np.ones(len(table), bool)
    for column in columns:
        keep &= np.array([v is not None and not (isinstance(v, float) and np.isnan(v))
                          for v in table[column]])
    if not keep.all():
        log.warning("%s: skipped %d of %d rows with an empty %s", where, int((~keep).sum()),
                    len(table), " or ".join(repr(c) for c in columns))
        table = table.select(np.flatnonzero(keep))
    if len(table) == 0:
        raise BertJaxError(f"{where}: no rows left with a {' and '.join(columns)}")
    return table


def label_key(value) -> str:
    """Labels as strings for the map: 1, 1.0 and "1" are the same label."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def label_names(table: datasets.Dataset, column: str) -> tuple[str, ...]:
    """The training labels in a fixed order: a ClassLabel's names, else sorted (numerically
    when every label is an integer)."""
    feature = table.features[column]
    if isinstance(feature, datasets.ClassLabel):
        return tuple(feature.names)
    keys = sorted({label_key(v) for v in table[column]})
    if all(k.lstrip("-").isdigit() for k in keys):
        keys.sort(key=int)
    return tuple(keys)


def label_ids(table: datasets.Dataset, column: str, names: Sequence[str], where: str) -> np.ndarray:
    """(N,) int32 ids of a split's labels; a label the training split never had is refused."""
    feature = table.features[column]
    values = table[column]
    if isinstance(feature, datasets.ClassLabel):
        values = [feature.int2str(v) if v >= 0 else None for v in values]
    index = {name: i for i, name in enumerate(names)}
    keys = [None if v is None else label_key(v) for v in values]
    unknown = sorted({k for k in keys if k not in index}, key=str)
    if unknown:
        count = sum(k not in index for k in keys)
        shown = ", ".join(repr(k) for k in unknown[:3]) + (" …" if len(unknown) > 3 else "")
        raise BertJaxError(f"{where}: column {column!r} has label(s) {shown} ({count} rows) that "
                           f"the training data never has (training labels: {', '.join(names)})")
    return np.array([index[k] for k in keys], np.int32)


def is_unlabelled(table: datasets.Dataset, column: str) -> bool:
    """Hub test splits (GLUE) carry ClassLabel -1 everywhere: no labels to score against."""
    feature = table.features.get(column)
    return isinstance(feature, datasets.ClassLabel) and all(v < 0 for v in table[column])


def encode(tok, table: datasets.Dataset, text_column: str, pair_column: str, max_length: int,
           where: str) -> dict[str, np.ndarray]:
    """(N, max_length) int32 input_ids, token_type_ids, attention_mask of a split."""
    texts = texts_of(table, text_column, where)
    pairs = texts_of(table, pair_column, where) if pair_column else None
    return tokenizer.encode_batch(tok, texts, pairs, max_length, pad=True)


def prepare(splits: dict, tok, text_column: str, pair_column: str, label_column: str,
            max_length: int) -> tuple[tuple[str, ...], dict[str, dict[str, np.ndarray]]]:
    """(label names, {split: columns with labels}); the label map comes from `train`."""
    columns = [text_column] + ([pair_column] if pair_column else [])
    cleaned = {}
    for split, (where, table) in splits.items():
        check_columns(table, where, columns + [label_column])
        if split != "train" and is_unlabelled(table, label_column):
            log.warning("%s: has no labels (all -1); not scored", where)
            continue
        cleaned[split] = (where, drop_empty(table, where, columns + [label_column]))
    if "train" not in cleaned:
        raise BertJaxError("splits: no training data (a train file, or a dataset with a train "
                           "split, is needed)")
    names = label_names(cleaned["train"][1], label_column)
    if len(names) < 2:
        raise BertJaxError(f"{cleaned['train'][0]}: column {label_column!r} has one label "
                           f"({names[0]}); classification needs at least two")
    out = {}
    for split, (where, table) in cleaned.items():
        arrays = encode(tok, table, text_column, pair_column, max_length, where)
        arrays["labels"] = label_ids(table, label_column, names, where)
        out[split] = arrays
    return names, out
