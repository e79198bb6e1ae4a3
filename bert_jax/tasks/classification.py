"""Sequence classification (single sentences and pairs): labelled text → fixed-shape examples
and the label map, its loss, its scores (accuracy, macro-F1, Matthews correlation), the Task,
and `predict`'s class probabilities per row.

Rows with an empty text or label are dropped with a counted warning (tasks/table_files.py), so every
metric covers exactly the rows it says.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from bert_jax.model_files import atomic
from bert_jax.data import tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.tasks import table_files
from bert_jax.tasks.task import (EvalSplit, Predictor, PredictRequest, Task, TaskData, inputs_of,
                                 split_files)

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)
FRAME_TYPES = (".csv", ".tsv", ".json", ".jsonl", ".parquet")  # what predict writes


def label_key(value) -> str:
    """Labels as strings for the map: 1, 1.0 and "1" are the same label."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def label_names(table: datasets.Dataset, column: str) -> tuple[str, ...]:
    """The training labels in a fixed order: a ClassLabel's names, else sorted (numerically
    when every label is an integer)."""
    import datasets
    feature = table.features[column]
    if isinstance(feature, datasets.ClassLabel):
        return tuple(feature.names)
    keys = sorted({label_key(v) for v in table[column]})
    if all(k.lstrip("-").isdigit() for k in keys):
        keys.sort(key=int)
    return tuple(keys)


def label_ids(table: datasets.Dataset, column: str, names: Sequence[str], where: str
              ) -> np.ndarray:
    """(N,) int32 ids of a split's labels; a label the training split never had is refused."""
    import datasets
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
    import datasets
    feature = table.features.get(column)
    return isinstance(feature, datasets.ClassLabel) and all(v < 0 for v in table[column])


def encode(tok, table: datasets.Dataset, text_column: str, pair_column: str, max_seq_length: int,
           where: str) -> dict[str, np.ndarray]:
    """(N, max_seq_length) int32 input_ids, token_type_ids, attention_mask of a split."""
    texts = table_files.texts_of(table, text_column, where)
    pairs = table_files.texts_of(table, pair_column, where) if pair_column else None
    return tokenizer.encode_batch(tok, texts, pairs, max_seq_length, pad=True)


def encode_splits(splits: dict, tok, text_column: str, pair_column: str, label_column: str,
                  max_seq_length: int) -> tuple[tuple[str, ...], dict[str, dict[str, np.ndarray]]]:
    """(label names, {split: columns with labels}); the label map comes from `train`."""
    columns = [text_column] + ([pair_column] if pair_column else [])
    cleaned = {}
    for split, (where, table) in splits.items():
        table_files.check_columns(table, where, columns + [label_column])
        if split != "train" and is_unlabelled(table, label_column):
            log.warning("%s: has no labels (all -1); not scored", where)
            continue
        cleaned[split] = (where, table_files.drop_empty(table, where, columns + [label_column]))
    if "train" not in cleaned:
        raise BertJaxError("splits: no training data (a train file, or a dataset with a train "
                           "split, is needed)")
    names = label_names(cleaned["train"][1], label_column)
    if len(names) < 2:
        raise BertJaxError(f"{cleaned['train'][0]}: column {label_column!r} has one label "
                           f"({names[0]}); classification needs at least two")
    out = {}
    for split, (where, table) in cleaned.items():
        arrays = encode(tok, table, text_column, pair_column, max_seq_length, where)
        arrays["labels"] = label_ids(table, label_column, names, where)
        out[split] = arrays
    return names, out


# -- scores ------------------------------------------------------------------------------------

def confusion(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, C) counts, rows = true class, columns = predicted class."""
    matrix = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(matrix, (np.asarray(labels), np.asarray(predictions)), 1)
    return matrix


def classification_scores(labels, predictions, num_classes: int) -> dict[str, float]:
    """accuracy, macro_f1 (the mean F1 of the classes present in the labels or the predictions,
    scikit-learn's default: a class in neither has no F1 to average) and mcc (the multiclass
    Matthews correlation; 0 when predictions or labels are constant)."""
    c = confusion(labels, predictions, num_classes).astype(np.float64)
    n = c.sum()
    tp = np.diag(c)
    predicted, actual = c.sum(0), c.sum(1)
    denominator = predicted + actual
    f1 = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    correct = tp.sum()
    cov = correct * n - predicted @ actual
    norm = np.sqrt((n * n - predicted @ predicted) * (n * n - actual @ actual))
    return {"accuracy": float(correct / n) if n else float("nan"),
            "macro_f1": float(f1[denominator > 0].mean()) if n else float("nan"),
            "mcc": float(cov / norm) if norm > 0 else 0.0}


def class_scores(logits: np.ndarray, labels: np.ndarray) -> tuple[dict, None]:
    """Accuracy, macro-F1, MCC and loss of (N, C) logits."""
    scores = classification_scores(labels, logits.argmax(-1), logits.shape[-1])
    log_probs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    scores["loss"] = float(-np.take_along_axis(log_probs, labels[:, None], 1).mean())
    scores["rows"] = len(labels)
    return scores, None


def class_evals(data: dict) -> dict:
    """An EvalSplit scoring (N, C) logits against `labels` for every split but train."""
    return {split: EvalSplit(inputs_of(a), lambda logits, labels=a["labels"]:
                             class_scores(logits, labels))
            for split, a in data.items() if split != "train"}


def loss(logits, batch: dict) -> dict:
    """Cross-entropy of (B, C) logits against `labels` (B,), as (sum, count); multiple choice
    uses it too. JAX is imported here, under jit, not when the task table is read."""
    import jax.numpy as jnp
    import optax
    labels = batch["labels"]
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)  # (B,)
    correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
    n = jnp.float32(labels.shape[0])
    return {"loss": (ce.sum(), n), "accuracy": (correct.sum(), n)}


# -- the task ----------------------------------------------------------------------------------

def load(cfg, tok) -> TaskData:
    splits = table_files.load_splits(cfg.dataset, cfg.dataset_config, split_files(cfg))
    names, data = encode_splits(splits, tok, cfg.text_column, cfg.text_pair_column,
                                cfg.label_column, cfg.max_seq_length)
    return TaskData(names, data["train"], class_evals(data), TASK.metrics)


def summary(r: dict) -> str:
    return (f"{r['rows']} rows: accuracy {r['accuracy']:.4f}, macro-F1 {r['macro_f1']:.4f}, "
            f"MCC {r['mcc']:.4f}")


# -- predict -----------------------------------------------------------------------------------

def predict_proba(config, params, tok, texts: Sequence[str], pairs: Optional[Sequence[str]] = None,
                  max_seq_length: int = 128, batch_size: int = 32) -> np.ndarray:
    """(N, num_labels) class probabilities of a BertForSequenceClassification."""
    import jax

    from bert_jax import inference
    from bert_jax.data import buckets
    inference.require_head(params, TASK.head)
    inference.check_sizes(config, max_seq_length, batch_size, pairs is not None)
    arrays = tokenizer.encode_batch(tok, texts, pairs, max_seq_length, pad=True)
    apply = functools.partial(inference.jitted(_class_probabilities), config,
                              jax.device_put(params))
    return buckets.run(apply, arrays, batch_size)


def _class_probabilities(config, params, batch):
    """(B, num_labels) softmax of a BertForSequenceClassification."""
    import jax

    from bert_jax.models import BertForSequenceClassification
    logits = BertForSequenceClassification(config).apply(
        {"params": params}, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    return jax.nn.softmax(logits, -1)


def _predict(request: PredictRequest, config, params, tok, warn) -> str:
    """The input's rows with predicted_label, probability and probability_LABEL per class."""
    from bert_jax import inference
    atomic.check_output_file(request.output, FRAME_TYPES, request.input)
    inference.require_head(params, TASK.head, request.model)
    inference.require_architecture(config, params, TASK.architecture, request.model)
    if config.num_labels < 2:  # probabilities of one class would all be 1
        raise BertJaxError(f"model {request.model}: has one output, a regression model; "
                           f"predict with --task regression")
    table, texts, pairs, length = read_rows(request, config, tok, warn)
    probs = predict_proba(config, params, tok, texts, pairs, length, request.batch_size)
    frame = table.to_pandas()
    frame["predicted_label"] = [config.id2label[i] for i in probs.argmax(-1)]
    frame["probability"] = probs.max(-1)
    for i, label in enumerate(config.id2label):
        frame[f"probability_{label}"] = probs[:, i]
    with atomic.atomic_file(request.output) as tmp:
        write_frame(frame, tmp)
    counts = frame["predicted_label"].value_counts().to_dict()
    return (f"wrote {len(frame)} predictions to {request.output}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def read_rows(request: PredictRequest, config, tok, warn) -> tuple:
    """(table, texts, pairs or None, length) of `predict`'s input file: the rows of a text (and
    pair) column, and the sequence length that fits them (128 unless asked; `warn` gets what
    fit_length says about it). Shared with regression."""
    from bert_jax import inference
    table, texts, pairs = table_files.read_texts(request.input, request.text_column,
                                            request.text_pair_column)
    wanted = 128 if request.max_seq_length is None else request.max_seq_length
    length, warnings = inference.fit_length(config, tok, texts, pairs, wanted,
                                            request.batch_size)
    warn(warnings)
    return table, texts, pairs, length


def write_frame(frame, path: str) -> None:
    ext = os.path.splitext(path)[1].lower()
    if ext in (".csv", ".tsv"):
        frame.to_csv(path, index=False, sep="\t" if ext == ".tsv" else ",")
    elif ext == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif ext == ".json":
        frame.to_json(path, orient="records", force_ascii=False)
    elif ext == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise BertJaxError(f"{path}: unknown output type {ext or '(none)'}; expected .csv, "
                           f".tsv, .json, .jsonl or .parquet")


TASK = Task(
    name="sequence-classification", architecture="BertForSequenceClassification", loss=loss,
    load=load, metrics=("mcc", "accuracy", "macro_f1"), headline=("accuracy", "macro_f1", "mcc"),
    summary=summary, about="labelled texts or text pairs (csv, tsv, json, jsonl, parquet)",
    predict=Predictor(_predict, FRAME_TYPES,
                      "a row per input row with predicted_label and probabilities"))
