"""Labelled tables for every task: local files (csv, tsv, json, jsonl, parquet; txt, one text a
line, for inference) or a `datasets` hub name, read into `datasets.Dataset`s.

Bad input is refused in one line naming the file and column; rows with an empty cell are dropped
with a counted warning, so every metric covers exactly the rows it says. `datasets` is imported
on first use: it takes a second, and the task table must stay cheap to read.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from bert_jax.data import text_files
from bert_jax import json_limits
from bert_jax.errors import BertJaxError

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

_BOM = b"\xef\xbb\xbf"
# a table row (a line) longer is refused before any parser reads the file
MAX_ROW_BYTES = 128 << 20
_BUILDERS = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"}), ".json": ("json", {}),
             ".jsonl": ("json", {}), ".parquet": ("parquet", {})}


def read_table(path: str) -> datasets.Dataset:
    """One local file as a Dataset; a .txt file gives one row per non-empty line, column text."""
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: file not found")
    import datasets
    ext = os.path.splitext(path)[1].lower()
    if ext == ".txt":
        lines = [line for line in text_files.read_utf8(path).split("\n") if line.strip()]
        table = datasets.Dataset.from_dict({"text": lines})
    elif ext in _BUILDERS:
        builder, options = _BUILDERS[ext]
        if os.path.getsize(path) == 0:
            raise BertJaxError(f"{path}: empty file")
        if ext != ".parquet":
            _check_text(path, builder)
        quiet = datasets.utils.are_progress_bars_disabled()
        verbosity = datasets.logging.get_verbosity()
        datasets.disable_progress_bars()  # one small local file: no "Generating split" bars
        datasets.logging.set_verbosity(logging.CRITICAL)  # its parse errors come back below
        try:  # prepared in a private cache, removed at once: no copy left in ~/.cache
            with tempfile.TemporaryDirectory(prefix="bert_jax-table-") as cache:
                table = datasets.load_dataset(builder, data_files={"rows": path}, split="rows",
                                              cache_dir=cache, keep_in_memory=True, **options)
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


def _check_text(path: str, builder: str) -> None:
    """Refuses, a line at a time, what the parsers report badly: pandas' decode error names no
    file and no offset, pyarrow segfaults on JSON nested thousands deep, and a row (a line of
    .jsonl, .csv, .tsv) over MAX_ROW_BYTES would be held several times over (a .json file,
    which may be one line, is read whole by its parser anyway)."""
    cap = None if path.lower().endswith(".json") else MAX_ROW_BYTES
    offset = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(text_files.line_blocks(f, path, cap, "table row"), 1):
            start = len(_BOM) if offset == 0 and raw.startswith(_BOM) else 0
            line = text_files.decode(raw[start:], path, offset + start)
            offset += len(raw)
            if builder == "json":
                json_limits.check_depth(line, path, number)


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
        from bert_jax.data import hub_datasets
        try:  # `name@revision` pins the revision
            loaded = hub_datasets.load_dataset(dataset, dataset_config or None)
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


def read_texts(path: str, text_column: str, pair_column: str):
    """(table, texts, pairs or None) of an input file's text columns, every row kept."""
    table = read_table(path)
    check_columns(table, path, [text_column] + ([pair_column] if pair_column else []))
    texts = texts_of(table, text_column, path)
    return table, texts, texts_of(table, pair_column, path) if pair_column else None
