"""The test-set predictions as the GLUE server takes them: one TSV per task and test split
(CoLA.tsv, SST-2.tsv, …, MNLI-m.tsv, MNLI-mm.tsv, AX.tsv), header `index<TAB>prediction`, the
server's label values (0/1, label names for MNLI, QNLI, RTE; numbers for STS-B)."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from bert_jax.model_files import atomic
from bert_jax.errors import BertJaxError

HEADER = "index\tprediction\n"


def write(path: str, indices: Sequence, predictions: Sequence) -> None:
    """One submission file, written atomically; floats (STS-B) with 3 decimals."""
    lines = [HEADER] + [f"{i}\t{_value(p)}\n"
                        for i, p in zip(indices, predictions, strict=True)]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic.atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)


def _value(prediction) -> str:
    return f"{prediction:.3f}" if isinstance(prediction, (float, np.floating)) else str(
        prediction)


def read(path: str) -> list[tuple[str, str]]:
    """(index, prediction) pairs of a submission file, its header checked."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or lines[0] + "\n" != HEADER:
        raise BertJaxError(f"{path}: not a GLUE submission file (header {HEADER.strip()!r})")
    return [tuple(line.split("\t")) for line in lines[1:]]
