"""GLUE splits, from a folder in the original download's layout or from the hub, as one row
layout: {"index", "sentence1", "sentence2" (pair tasks), "label" (labelled splits)}.

The download's TSVs are read as the GLUE baselines and `datasets`' glue script read them: split on
tabs with no quoting (their texts hold stray quotes). A row with the wrong number of fields is
an error naming the file and line, except in QQP's train and dev files, whose known broken rows
are counted and skipped. Labels must be the task's (STS-B: a number), or the line is named too.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from bert_jax.data import text_files
from bert_jax.errors import BertJaxError
from bert_jax.glue.benchmark import HUB, SKIPS_MALFORMED, GlueTask, Split

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Rows:
    """One split's rows and where they came from (for messages and results)."""

    where: str  # a file path, or "nyu-mll/glue cola test"
    rows: list  # [{"index", "sentence1", "sentence2"?, "label"?}]
    skipped: int = 0  # malformed rows left out (QQP)


def read_local(task: GlueTask, split: str, data_dir: str) -> Rows:
    """One split of `task` from DATA_DIR/<task>/*.tsv (MNLI's diagnostic: DATA_DIR/diagnostic)."""
    spec = task.splits[split]
    path = os.path.join(data_dir, spec.file)
    if not os.path.isfile(path):
        folder = os.path.join(data_dir, os.path.dirname(spec.file))
        if not os.path.isdir(folder):
            raise BertJaxError(f"{folder}: no such folder (the GLUE layout has one folder per "
                               f"task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI)")
        expected = ", ".join(os.path.basename(s.file) for s in task.splits.values()
                             if os.path.dirname(s.file) == os.path.dirname(spec.file))
        raise BertJaxError(f"{folder}: no {os.path.basename(spec.file)} (the {task.name} "
                           f"folder of the GLUE layout has {expected})")
    lines = text_files.read_utf8(path).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or (spec.header and len(lines) == 1):
        raise BertJaxError(f"{path}: no rows")
    positions, width = _positions(spec, lines[0], path)
    width = width or max(p for p in positions if p is not None) + 1  # headerless: at least
    rows, skipped = [], 0
    for number, line in enumerate(lines[1 if spec.header else 0:], 2 if spec.header else 1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != width if spec.header else len(fields) < width:
            if task.name in SKIPS_MALFORMED and spec.labelled:
                skipped += 1
                continue
            raise BertJaxError(f"{path}: line {number}: {len(fields)} tab-separated fields, "
                               f"expected {width}")
        rows.append(_row(task, spec, fields, positions, path, number, len(rows)))
    if skipped:
        log.warning("%s: skipped %d of %d rows with the wrong number of fields", path, skipped,
                    skipped + len(rows))
    return Rows(path, rows, skipped)


def _positions(spec: Split, header: str, path: str) -> tuple[list, int]:
    """([text, pair, label, index] field positions or None, the header's width or 0)."""
    wanted = list(spec.columns) + [spec.index_column]
    if not spec.header:
        return [c if c != "" else None for c in wanted], 0
    names = header.rstrip("\r").lstrip("\ufeff").split("\t")  # MRPC's files start with a BOM
    positions = []
    for column in wanted:
        if column == "":
            positions.append(None)
        elif column in names:
            positions.append(names.index(column))
        else:
            raise BertJaxError(f"{path}: no column {column!r} in its header; columns present: "
                               f"{', '.join(names)}")
    return positions, len(names)


def _row(task: GlueTask, spec: Split, fields: list, positions: list, path: str, number: int,
         row: int) -> dict:
    text, pair, label, index = (fields[p] if p is not None else None for p in positions)
    out = {"index": _index(index, row), "sentence1": text}
    if pair is not None:
        out["sentence2"] = pair
    if label is not None:
        column = spec.columns[2]
        name = f"column {column + 1}" if isinstance(column, int) else f"column {column!r}"
        out["label"] = label_value(task, label.strip(), f"{path}: line {number}: {name}")
    return out


def _index(value, row: int):
    """The test row's own index (what the server matches), else its position."""
    if value is None:
        return row
    value = value.strip()
    return int(value) if value.isdigit() else value


def label_value(task: GlueTask, value, where: str):
    """A label as the server writes it: one of task.labels, or a float for STS-B."""
    if task.regression:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if number != number or number in (float("inf"), float("-inf")):
            raise BertJaxError(f"{where} is {value!r}; expected a number (a similarity score "
                               f"0-5)")
        return number
    if value not in task.labels:
        raise BertJaxError(f"{where} is {value!r}; expected one of {', '.join(task.labels)}")
    return value


def read_hub(task: GlueTask, split: str, hub: str = HUB) -> Rows:
    """One split of `task` from a `datasets` hub name in nyu-mll/glue's layout (its test
    splits carry label -1: read without labels, to be predicted)."""
    from bert_jax.data import hub_datasets
    spec = task.splits[split]
    where = f"{hub} {spec.hub_config} {spec.hub_split}"
    try:  # `name@revision` pins the revision (and is part of data/<task>/source.json's key)
        table = hub_datasets.load_dataset(hub, spec.hub_config, split=spec.hub_split)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BertJaxError(f"dataset {where}: could not load ({first})") from None
    text, pair = task.hub_columns
    for column in (text, pair, "label", "idx"):
        if column and column not in table.column_names:
            raise BertJaxError(f"dataset {where}: no column {column!r}; columns present: "
                               f"{', '.join(table.column_names)}")
    feature = table.features["label"]
    rows = []
    for i, record in enumerate(table):
        row = {"index": record["idx"], "sentence1": record[text]}
        if pair:
            row["sentence2"] = record[pair]
        if spec.labelled:
            value = record["label"]
            if not task.regression:
                if not isinstance(value, int) or not 0 <= value < len(task.labels):
                    raise BertJaxError(f"dataset {where}: row {i + 1}: column 'label' is "
                                       f"{value!r}; expected a class index 0-"
                                       f"{len(task.labels) - 1} ({getattr(feature, 'names', '')})")
                value = task.labels[value]
            row["label"] = label_value(task, value, f"dataset {where}: row {i + 1}: column "
                                                    f"'label'")
        rows.append(row)
    return Rows(where, rows)
