"""Sequence regression (single sentences and pairs, e.g. STS-B): numeric targets → one output
per row, trained with mean-squared error and scored by Pearson and Spearman correlation (and
MSE); `predict` adds `predicted_value` to every input row.

The head is transformers' BertForSequenceClassification with num_labels=1 and
problem_type="regression", so the export loads there and predicts what ours does. A target that
is missing or not a number is an error naming the file, row and column: unlike a class label, a
guessed value would silently change every score.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from bert_jax.model_files import atomic
from bert_jax.data import tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.tasks import classification, table_files
from bert_jax.tasks.task import (EvalSplit, Predictor, PredictRequest, Task, TaskData, inputs_of,
                                 split_files)

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)
UNLABELLED = -1.0  # the hub's GLUE test splits (STS-B) mark every target so


def targets(table: datasets.Dataset, column: str, where: str) -> np.ndarray:
    """(N,) float32 targets; row numbers count data rows from 1, as the other tasks' errors."""
    values = table[column]
    out = np.empty(len(values), np.float32)
    for row, value in enumerate(values, 1):
        number = _number(value)
        if number is None:
            shown = "empty" if value is None or value == "" or (
                isinstance(value, float) and np.isnan(value)) else f"{value!r}"
            raise BertJaxError(f"{where}: row {row}: column {column!r} is {shown}; expected a "
                               f"number (regression target)")
        out[row - 1] = number
    return out


def _number(value) -> Optional[float]:
    """A finite float of an int, float or numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value):
        return float(value)
    return None


def encode_splits(splits: dict, tok, text_column: str, pair_column: str, label_column: str,
                  max_seq_length: int) -> dict[str, dict[str, np.ndarray]]:
    """{split: input columns and float32 `labels`}; a split other than train whose targets are
    all -1 (a hub test split) is left out with a warning. Rows with an empty text are dropped
    with a counted warning, after every target was checked."""
    texts = [text_column] + ([pair_column] if pair_column else [])
    out = {}
    for split, (where, table) in splits.items():
        table_files.check_columns(table, where, texts + [label_column])
        labels = targets(table, label_column, where)
        if split != "train" and len(labels) and np.all(labels == UNLABELLED):
            log.warning("%s: has no labels (all -1); not scored", where)
            continue
        keep = table_files.drop_empty(table.add_column("_row", list(range(len(table)))), where,
                                 texts)
        arrays = classification.encode(tok, keep, text_column, pair_column, max_seq_length, where)
        arrays["labels"] = labels[np.asarray(keep["_row"], np.int64)]
        out[split] = arrays
    if "train" not in out:
        raise BertJaxError("splits: no training data (a train file, or a dataset with a train "
                           "split, is needed)")
    return out


# -- scores ------------------------------------------------------------------------------------

def ranks(x) -> np.ndarray:
    """1-based ranks with ties at their mean rank (scipy.stats.rankdata's "average")."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    mean_rank = (starts + ends + 1) / 2.0  # ranks starts+1 … ends, averaged
    out = np.empty(len(x))
    out[order] = np.repeat(mean_rank, ends - starts)
    return out


def pearson(x, y) -> float:
    """Pearson correlation; 0 when either side is constant (no correlation to measure), so a
    model that predicts one value scores 0, as MCC does for classification."""
    x = np.asarray(x, np.float64) - np.mean(x)
    y = np.asarray(y, np.float64) - np.mean(y)
    norm = np.sqrt((x @ x) * (y @ y))
    return float(np.clip((x @ y) / norm, -1.0, 1.0)) if norm > 0 else 0.0


def regression_scores(predictions, labels) -> dict[str, float]:
    """pearson, spearman (Pearson of the ranks) and mse of (N,) predictions."""
    predictions = np.asarray(predictions, np.float64)
    labels = np.asarray(labels, np.float64)
    return {"pearson": pearson(predictions, labels),
            "spearman": pearson(ranks(predictions), ranks(labels)),
            "mse": float(np.mean((predictions - labels) ** 2)) if len(labels) else float("nan"),
            "rows": len(labels)}


def _split_scores(logits: np.ndarray, labels: np.ndarray) -> tuple[dict, None]:
    scores = regression_scores(logits[:, 0], labels)
    scores["loss"] = scores["mse"]
    return scores, None


def loss(logits, batch: dict) -> dict:
    """Mean-squared error of (B, 1) outputs against float `labels` (B,), as (sum, count), as
    transformers' MSELoss for num_labels=1. JAX is imported here, under jit."""
    import jax.numpy as jnp
    labels = batch["labels"].astype(jnp.float32)
    error = logits[:, 0].astype(jnp.float32) - labels
    return {"loss": ((error * error).sum(), jnp.float32(labels.shape[0]))}


# -- the task ----------------------------------------------------------------------------------

def load(cfg, tok) -> TaskData:
    splits = table_files.load_splits(cfg.dataset, cfg.dataset_config, split_files(cfg))
    data = encode_splits(splits, tok, cfg.text_column, cfg.text_pair_column, cfg.label_column,
                         cfg.max_seq_length)
    evals = {split: EvalSplit(inputs_of(a), functools.partial(_split_scores, labels=a["labels"]))
             for split, a in data.items() if split != "train"}
    return TaskData((), data["train"], evals, TASK.metrics)


def summary(r: dict) -> str:
    return (f"{r['rows']} rows: Pearson {r['pearson']:.4f}, Spearman {r['spearman']:.4f}, "
            f"MSE {r['mse']:.4f}")


# -- predict -----------------------------------------------------------------------------------

def predict_values(config, params, tok, texts: Sequence[str],
                   pairs: Optional[Sequence[str]] = None, max_seq_length: int = 128,
                   batch_size: int = 32) -> np.ndarray:
    """(N,) float32 predicted values of a one-output BertForSequenceClassification."""
    import jax

    from bert_jax import inference
    from bert_jax.data import buckets
    inference.require_head(params, TASK.head)
    _require_one_output(config, "model")
    inference.check_sizes(config, max_seq_length, batch_size, pairs is not None)
    arrays = tokenizer.encode_batch(tok, texts, pairs, max_seq_length, pad=True)
    apply = functools.partial(inference.jitted(_values), config, jax.device_put(params))
    return buckets.run(apply, arrays, batch_size)


def _values(config, params, batch):
    """(B,) outputs of a one-output BertForSequenceClassification."""
    from bert_jax.models import BertForSequenceClassification
    return BertForSequenceClassification(config).apply(
        {"params": params}, batch["input_ids"], batch["token_type_ids"],
        batch["attention_mask"])[:, 0]


def _require_one_output(config, where: str) -> None:
    if config.num_labels != 1:
        raise BertJaxError(f"{where}: is a classifier with {config.num_labels} labels, not a "
                           f"regression model (one output)")


def _predict(request: PredictRequest, config, params, tok, warn) -> str:
    """The input's rows with predicted_value."""
    from bert_jax import inference
    atomic.check_output_file(request.output, classification.FRAME_TYPES, request.input)
    inference.require_head(params, TASK.head, request.model)
    inference.require_architecture(config, params, TASK.architecture, request.model)
    _require_one_output(config, f"model {request.model}")
    table, texts, pairs, length = classification.read_rows(request, config, tok, warn)
    values = predict_values(config, params, tok, texts, pairs, length, request.batch_size)
    frame = table.to_pandas()
    frame["predicted_value"] = values
    with atomic.atomic_file(request.output) as tmp:
        classification.write_frame(frame, tmp)
    return (f"wrote {len(frame)} predictions to {request.output}: mean {values.mean():.4f}, "
            f"range {values.min():.4f} … {values.max():.4f}")


TASK = Task(
    name="regression", architecture="BertForSequenceClassification", loss=loss, load=load,
    metrics=("pearson", "spearman"), headline=("pearson", "spearman", "mse"), summary=summary,
    about="texts or text pairs with a numeric target, --label-column (csv, tsv, json, jsonl, "
          "parquet)",
    id2label=("LABEL_0",), problem_type="regression",
    predict=Predictor(_predict, classification.FRAME_TYPES,
                      "a row per input row with predicted_value"))
