"""Losses and metrics as (sum, denominator) pairs, so they add exactly across micro-batches,
devices and logging windows before one final division."""

from __future__ import annotations

import jax.numpy as jnp
import optax


def mlm(logits, ids, weights) -> dict[str, tuple]:
    """Masked LM over gathered positions.

    Args:
      logits: (B, P, V) float32; ids: (B, P) int labels; weights: (B, P) 1.0 real, 0.0 padding.
    Returns:
      {"mlm_loss": (Σ w·CE, Σ w), "mlm_accuracy": (Σ w·[argmax = id], Σ w)}.
    """
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, ids)  # (B, P)
    correct = (jnp.argmax(logits, -1) == ids).astype(jnp.float32)
    n = weights.sum()
    return {"mlm_loss": ((ce * weights).sum(), n), "mlm_accuracy": ((correct * weights).sum(), n)}


def classification(logits, labels, prefix: str, weights=None) -> dict[str, tuple]:
    """Softmax classification (NSP): logits (B, C), labels (B,); a task's own loss lives with
    the task (bert_jax/tasks).

    `weights` (B,) zeroes padded rows of a last, partial evaluation batch.
    """
    weights = jnp.ones(labels.shape, jnp.float32) if weights is None else weights
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)  # (B,)
    correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
    n = weights.sum()
    return {f"{prefix}_loss": ((ce * weights).sum(), n),
            f"{prefix}_accuracy": ((correct * weights).sum(), n)}


def total_loss(values: dict) -> dict:
    """Host side: `values` (means) with "loss" = mlm_loss + nsp_loss, the sum the pretraining
    step minimises; mlm_loss alone when there is no nsp_loss (objective "mlm"). Returns `values`.
    """
    values["loss"] = values["mlm_loss"] + values.get("nsp_loss", 0.0)
    return values


def add(a: dict, b: dict) -> dict:
    """Metric dicts of (sum, denominator) added elementwise."""
    return {k: (a[k][0] + b[k][0], a[k][1] + b[k][1]) for k in a}


def means(metrics: dict) -> dict[str, float]:
    """Host side: sums / denominators (NaN where nothing was counted)."""
    out = {}
    for k, (total, count) in metrics.items():
        total, count = float(total), float(count)
        out[k] = total / count if count else float("nan")
    return out
