"""Classification scores from host predictions: accuracy, macro-F1, Matthews correlation."""

from __future__ import annotations

import numpy as np


def confusion(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
    """(C, C) counts, rows = true class, columns = predicted class."""
    matrix = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(matrix, (np.asarray(labels), np.asarray(predictions)), 1)
    return matrix


def classification_scores(labels, predictions, num_classes: int) -> dict[str, float]:
    """accuracy, macro_f1 (mean over classes, 0 for a class never predicted nor present) and
    mcc (the multiclass Matthews correlation; 0 when predictions or labels are constant)."""
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
            "macro_f1": float(f1.mean()),
            "mcc": float(cov / norm) if norm > 0 else 0.0}
