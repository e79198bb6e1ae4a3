"""Matmuls whose operands are rounded to the compute dtype and whose products accumulate in float32.

For bfloat16 this is what makes it pay on CPU: XLA:CPU multiplies bfloat16 into a float32 result
faster than float32 (as fast as torch's bfloat16), but into a bfloat16 result slower than
float32 (the rates are in bench/RESULTS.md). JAX's own backward pass of such a product
multiplies the float32 output gradient with a bfloat16 operand, a float32 matmul, so the
backward products are written out here to round the gradient to bfloat16 first, as
torch.autocast does.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def einsum(spec: str, x, w, dtype) -> jax.Array:
    """jnp.einsum(spec, x, w) with both rounded to `dtype`, accumulated in float32; float32 result.

    `w` is a parameter: the backward pass rounds it again rather than keeping a rounded copy
    (it is alive anyway; a rounded copy of every weight would stay alive beside it). spec is a
    two-operand einsum without ellipses in which every index appears in exactly two of the
    three terms (a matmul), so that its gradients are einsums of the same kind.
    """
    if jnp.dtype(dtype) == jnp.float32:
        return jnp.einsum(spec, x, w)
    return _rounded_einsum(spec, jnp.dtype(dtype), x.astype(dtype), w)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _rounded_einsum(spec, dtype, x, w):
    return jnp.einsum(spec, x, w.astype(dtype), preferred_element_type=jnp.float32)


def _rounded_einsum_fwd(spec, dtype, x, w):
    return _rounded_einsum(spec, dtype, x, w), (x, w)


def _rounded_einsum_bwd(spec, dtype, residuals, g):
    x, w = residuals
    (tx, tw), out = spec.split("->")[0].split(","), spec.split("->")[1]
    g = g.astype(dtype)
    dx = jnp.einsum(f"{out},{tw}->{tx}", g, w.astype(dtype), preferred_element_type=jnp.float32)
    dw = jnp.einsum(f"{out},{tx}->{tw}", g, x, preferred_element_type=jnp.float32)
    return dx.astype(x.dtype), dw.astype(w.dtype)


_rounded_einsum.defvjp(_rounded_einsum_fwd, _rounded_einsum_bwd)
