"""Multiple choice (SWAG): rows → (N, C, L) pairs of context and each candidate ending, scored
by accuracy; the loss and scores are sequence classification's over the C endings."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from bert_jax.data import tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.tasks import classification, table_files
from bert_jax.tasks.task import Task, TaskData, require_train, split_files

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

ENDINGS = ("ending0", "ending1", "ending2", "ending3")


def load_splits(dataset: str = "", dataset_config: str = "", files: Optional[dict] = None
                ) -> dict[str, tuple[str, datasets.Dataset]]:
    """{split: (name for messages, Dataset)} from csv/tsv/json/jsonl/parquet files ({split:
    path}) or a hub dataset (swag, config "regular")."""
    return table_files.load_splits(dataset, dataset_config, files)


def _is_empty(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _texts(table: datasets.Dataset, column: str, where: str) -> list[str]:
    values = table[column]
    for row, value in enumerate(values, 1):
        if _is_empty(value):
            raise BertJaxError(f"{where}: row {row}: column {column!r} is empty; expected text")
    return [v if isinstance(v, str) else str(v) for v in values]


def encode(tok, table: datasets.Dataset, where: str, max_seq_length: int,
           context_column: str = "sent1", start_column: str = "sent2",
           ending_columns: Sequence[str] = ENDINGS, label_column: str = "label"
           ) -> dict[str, np.ndarray]:
    """Each row → C pairs (context, start + " " + ending_c), as Hugging Face's run_swag:
    the model scores every pair with one logit and a softmax over the C picks the ending.

    Pairs longer than max_seq_length are trimmed longer segment first. start_column "" uses the
    ending alone as the second segment. Returns input_ids, token_type_ids, attention_mask:
    (N, C, max_seq_length) int32; labels: (N,) int32 (the right ending's index) when the label
    column exists and is not all -1 (hub test splits are unlabelled).
    """
    endings = list(ending_columns)
    if len(endings) < 2:
        raise BertJaxError(f"ending_columns: expected at least two candidate endings, got "
                           f"{endings}")
    table_files.check_columns(table, where, [context_column] +
                         ([start_column] if start_column else []) + endings)
    contexts = _texts(table, context_column, where)
    starts = _texts(table, start_column, where) if start_column else [""] * len(table)
    candidates = [_texts(table, column, where) for column in endings]
    firsts = [context for context in contexts for _ in endings]
    seconds = [f"{start} {ending[row]}" if start else ending[row]
               for row, start in enumerate(starts) for ending in candidates]
    flat = tokenizer.encode_batch(tok, firsts, seconds, max_seq_length, pad=True)
    shape = (len(table), len(endings), max_seq_length)
    out = {k: v.reshape(shape) for k, v in flat.items()}
    if label_column in table.column_names:
        labels = _labels(table[label_column], where, label_column, len(endings))
        if labels is None:
            log.warning("%s: has no labels (all -1); not scored", where)
        else:
            out["labels"] = labels
    return out


def _labels(values: list, where: str, column: str, choices: int) -> Optional[np.ndarray]:
    """(N,) int32 ending indices; None when every label is -1 (unlabelled split)."""
    ids = []
    for row, value in enumerate(values, 1):
        if _is_empty(value):
            raise BertJaxError(f"{where}: row {row}: column {column!r} is empty; expected the "
                               f"right ending's index 0..{choices - 1}")
        key = classification.label_key(value)
        ids.append(int(key) if key.lstrip("-").isdigit() else None)
        if ids[-1] is None:
            raise BertJaxError(f"{where}: row {row}: column {column!r} is {value!r}; expected "
                               f"the right ending's index 0..{choices - 1}")
    if ids and all(i == -1 for i in ids):
        return None
    for row, i in enumerate(ids, 1):
        if not 0 <= i < choices:
            raise BertJaxError(f"{where}: row {row}: column {column!r} is {i}; expected the "
                               f"right ending's index 0..{choices - 1}")
    return np.asarray(ids, np.int32)


def load(cfg, tok) -> TaskData:
    splits = load_splits(cfg.dataset, cfg.dataset_config, split_files(cfg))
    require_train(splits)
    data = {}
    for split, (where, table) in splits.items():
        arrays = encode(tok, table, where, cfg.max_seq_length, cfg.choice_context_column,
                        cfg.choice_start_column, [f"ending{i}" for i in range(cfg.num_choices)],
                        cfg.label_column)
        if "labels" not in arrays:  # encode has warned: not scored
            if split == "train":
                raise BertJaxError(f"{where}: has no labels to train on (column "
                                   f"{cfg.label_column!r})")
            continue
        data[split] = arrays
    return TaskData((), data["train"], classification.class_evals(data), TASK.metrics)


def summary(r: dict) -> str:
    return f"{r['rows']} questions: accuracy {r['accuracy']:.4f}"


TASK = Task(
    name="multiple-choice", architecture="BertForMultipleChoice", loss=classification.loss,
    load=load, metrics=("accuracy",), headline=("accuracy",), summary=summary,
    about="SWAG columns (a context, a start and num_choices endings)")
