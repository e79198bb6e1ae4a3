"""Softmax attention with dropout on the probabilities whose backward pass recomputes them.

`flax.linen.dot_product_attention` with dropout (float32 softmax), mask for mask, except that the
backward pass recomputes the (B, N, L, L) softmax from q and k rather than keeping its
intermediates, and keeps the dropout mask as bits (ops.dropout) rather than as a float32
multiplier. Without dropout (forward passes, and training at dropout 0 as the default
pretraining recipe does) it is `forward_attention`: jax.nn.dot_product_attention's product in a
layout XLA:CPU computes faster, forward and backward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models.ops.dropout import dropout


def attention(q, k, v, mask, *, dropout_rate: float = 0.0, dropout_rng=None,
              dtype=jnp.float32) -> jax.Array:
    """Multi-head attention over unmasked keys.

    Args:
      q, k, v: (B, L, N, D); mask: (B, 1, 1, L) or broadcastable to (B, N, L, L), True = attend.
      dropout_rate: dropped share of attention probabilities (needs `dropout_rng`).
      dtype: the batched products' dtype (the softmax is float32 either way).
    Returns:
      (B, L, N, D) context vectors.
    """
    if dropout_rate == 0.0:  # autodiff of the heads-first product: a 4% faster tiny step,
        return forward_attention(q, k, v, mask, dtype)  # 9% mini (bench/RESULTS.md)

    probs = jax.checkpoint(lambda q, k: attention_probs(q, k, mask, dtype))

    # batched products stay in `dtype`: XLA:CPU has no bfloat16 x bfloat16 = float32 kernel
    # for some of their gradients (and they are a small share of a step's FLOPs)
    p = dropout(dropout_rng, probs(q.astype(dtype), k.astype(dtype)),
                1.0 - dropout_rate).astype(dtype)
    return jnp.einsum("...hqk,...khd->...qhd", p, v.astype(dtype))  # (B, L, N, D)


def attention_probs(q, k, mask, dtype=jnp.float32) -> jax.Array:
    """(B, N, L, L) float32 softmax probabilities of q (B, L, N, D) over the unmasked keys of
    k, products in `dtype`: the dropout path's, and BertModel(output_attentions=True)'s, which
    computes them beside the fused default path rather than changing it."""
    q = q / jnp.sqrt(q.shape[-1]).astype(dtype)
    scores = jnp.einsum("...qhd,...khd->...hqk", q, k)  # (B, N, L, L)
    scores = jnp.where(mask, scores, jnp.finfo(dtype).min)
    return jax.nn.softmax(scores.astype(jnp.float32))


def forward_attention(q, k, v, mask, dtype=jnp.float32) -> jax.Array:
    """`jax.nn.dot_product_attention(q, k, v, mask=mask)` in heads-first layout with both
    products accumulated in float32 (forward passes and dropout-free training).

    Given (B, L, N, D) operands, XLA:CPU copies k and v into (B, N, D, L) for the batched
    products and the (B, N, D, L) result back, transposes that move single elements; moved to
    (B, N, L, D) first, every copy moves whole D-vectors. jax.nn's probabilities · v product
    is bfloat16 × bfloat16 → bfloat16 in bfloat16, for which XLA:CPU has only a slow kernel
    (ops.matmul); here it accumulates in float32 and is rounded once. Same arguments and
    (B, L, N, D) result in `dtype` (figures: bench/RESULTS.md).
    """
    q, k, v = (x.astype(dtype).transpose(0, 2, 1, 3) for x in (q, k, v))  # (B, N, L, D)
    scores = jnp.einsum("bnqd,bnkd->bnqk", q, k, preferred_element_type=jnp.float32)
    scores = scores * jnp.float32(1.0 / np.sqrt(q.shape[-1]))  # (B, N, L, L)
    scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, -1).astype(dtype)
    ctx = jnp.einsum("bnqk,bnkd->bnqd", probs, v, preferred_element_type=jnp.float32)
    return ctx.astype(dtype).transpose(0, 2, 1, 3)  # (B, L, N, D)
