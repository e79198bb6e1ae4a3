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
    """Softmax classification (NSP or a sequence task): logits (B, C), labels (B,).

    `weights` (B,) zeroes padded rows of a last, partial evaluation batch.
    """
    weights = jnp.ones(labels.shape, jnp.float32) if weights is None else weights
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)  # (B,)
    correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
    n = weights.sum()
    return {f"{prefix}_loss": ((ce * weights).sum(), n),
            f"{prefix}_accuracy": ((correct * weights).sum(), n)}


def token_classification(logits, labels) -> dict[str, tuple]:
    """Per-position tagging: logits (B, L, C), labels (B, L) with -100 where nothing is scored
    (special tokens, padding, a word's later pieces). Averaged over scored positions."""
    weights = (labels >= 0).astype(jnp.float32)
    safe = jnp.maximum(labels, 0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, safe)  # (B, L)
    correct = (jnp.argmax(logits, -1) == safe).astype(jnp.float32)
    n = weights.sum()
    return {"loss": ((ce * weights).sum(), n), "accuracy": ((correct * weights).sum(), n)}


def span(start_logits, end_logits, start_positions, end_positions) -> dict[str, tuple]:
    """Span extraction as BERT's run_squad: the mean of the start and end cross-entropies.

    Logits (B, L), positions (B,) (0, the [CLS] token, for no answer in the window); accuracy
    counts rows whose start and end are both right.
    """
    ce = (optax.softmax_cross_entropy_with_integer_labels(start_logits, start_positions)
          + optax.softmax_cross_entropy_with_integer_labels(end_logits, end_positions)) / 2
    correct = ((jnp.argmax(start_logits, -1) == start_positions)
               & (jnp.argmax(end_logits, -1) == end_positions)).astype(jnp.float32)
    n = jnp.float32(start_positions.shape[0])
    return {"loss": (ce.sum(), n), "accuracy": (correct.sum(), n)}


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
