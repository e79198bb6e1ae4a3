"""LayerNorm with a hand-written backward pass: `flax.linen.LayerNorm(dtype=float32)`'s
parameters and forward, op for op, but the backward keeps only the normalised input and the
reciprocal standard deviation (autodiff kept three activation-sized arrays)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp


class LayerNorm(nn.Module):
    """nn.LayerNorm(epsilon, dtype=float32): the output is float32 whatever the input dtype."""

    epsilon: float

    @nn.compact
    def __call__(self, x):
        x = x.astype(jnp.float32)
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (x.shape[-1],), jnp.float32)
        return layer_norm(x, scale, bias, self.epsilon)


def _stats(x, epsilon):
    """flax's: mean, and E[x²] - mean² (clamped at 0) for the variance."""
    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(0.0, (x * x).mean(-1, keepdims=True) - mean * mean)
    return mean, jax.lax.rsqrt(var + epsilon)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def layer_norm(x, scale, bias, epsilon):
    """(x - mean) / std · scale + bias over the last axis."""
    mean, rstd = _stats(x, epsilon)
    return (x - mean) * (rstd * scale) + bias


def _layer_norm_fwd(x, scale, bias, epsilon):
    mean, rstd = _stats(x, epsilon)
    return (x - mean) * (rstd * scale) + bias, ((x - mean) * rstd, rstd, scale)


def _layer_norm_bwd(epsilon, residuals, g):
    x_hat, rstd, scale = residuals
    batch_axes = tuple(range(g.ndim - 1))
    gs = g * scale
    dx = rstd * (gs - gs.mean(-1, keepdims=True)
                 - x_hat * (gs * x_hat).mean(-1, keepdims=True))
    return dx, (g * x_hat).sum(batch_axes), g.sum(batch_axes)


layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)
