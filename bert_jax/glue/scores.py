"""GLUE's official scores of a task's dev predictions, and the average as GLUE reports it.

CoLA: Matthews correlation; STS-B: Pearson and Spearman; MRPC and QQP: F1 of the positive class
("1") and accuracy; MNLI: matched and mismatched accuracy; the rest: accuracy. A task with two
scores counts their mean in the average (GLUE's rule); the scores are on 0-1 here, the tables
show them ×100 as the paper.
"""

from __future__ import annotations

import numpy as np

from bert_jax.tasks.classification import classification_scores
from bert_jax.glue.benchmark import GlueTask
from bert_jax.tasks.regression import regression_scores


def split_scores(task: GlueTask, predictions, labels) -> dict[str, float]:
    """The official scores of one dev split: predictions and labels as the server writes them
    (label values; floats for STS-B)."""
    if task.regression:
        scores = regression_scores(predictions, labels)
        return {"pearson": scores["pearson"], "spearman": scores["spearman"]}
    index = {label: i for i, label in enumerate(task.labels)}
    truth = np.array([index[v] for v in labels])
    guess = np.array([index[v] for v in predictions])
    scores = classification_scores(truth, guess, len(task.labels))
    out = {"accuracy": scores["accuracy"]}
    if "mcc" in task.metrics:
        out = {"mcc": scores["mcc"]}
    if "f1" in task.metrics:
        out = {"f1": binary_f1(truth, guess), "accuracy": scores["accuracy"]}
    return out


def binary_f1(labels, predictions) -> float:
    """F1 of class 1 (scikit-learn's f1_score default; 0 when it is never predicted or true)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = float(np.sum((labels == 1) & (predictions == 1)))
    denominator = float(np.sum(labels == 1) + np.sum(predictions == 1))
    return 2 * tp / denominator if denominator else 0.0


def task_scores(task: GlueTask, by_split: dict[str, dict]) -> dict[str, float]:
    """The task's official scores from its scored dev splits' (MNLI: matched and mismatched
    accuracy, named so)."""
    if task.name == "MNLI":
        return {"matched_accuracy": by_split["validation"]["accuracy"],
                "mismatched_accuracy": by_split["validation_mismatched"]["accuracy"]}
    return dict(by_split["validation"])


def task_score(task: GlueTask, scores: dict[str, float]) -> float:
    """One number per task: the mean of its official scores (GLUE's rule for two)."""
    return float(np.mean([scores[m] for m in task.metrics]))


def glue_average(tasks: list[GlueTask], scores: list[dict]) -> float:
    """GLUE's average: the mean over tasks of each task's score (task_score)."""
    return float(np.mean([task_score(t, s) for t, s in zip(tasks, scores, strict=True)]))
