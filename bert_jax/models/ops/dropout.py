"""Dropout whose masks equal nn.Dropout's bit for bit but cost a fraction as much on CPU.

jax.random.bernoulli draws threefry2x32 bits through a rolled 5-iteration loop on CPU: each
iteration writes two uint32 arrays the size of the mask, so drawing dropout masks was a visible
share of a BERT-base step. Here the same hash is unrolled into one elementwise fusion over the
element index, and compared with the keep threshold as an integer.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(x, d: int):
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds (Salmon et al., 2011), unrolled, as jax's own hash."""
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def random_bits(key, shape) -> jax.Array:
    """jax.random.bits(key, shape, uint32) for a threefry key (partitionable mode, JAX's default):
    element i is the xor of the two words of threefry2x32(key, (0, i)). Other keys fall back to
    jax.random.bits itself."""
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else key
    if ((typed and str(jax.random.key_impl(key)) != "threefry2x32") or data.shape != (2,)
            or not jax.config.jax_threefry_partitionable or math.prod(shape) >= 2 ** 32):
        return jax.random.bits(key, shape, jnp.uint32)
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]
    index = sum(jax.lax.broadcasted_iota(jnp.uint32, shape, d) * np.uint32(s)
                for d, s in enumerate(strides))
    x0, x1 = threefry2x32(data[0], data[1], jnp.zeros(shape, jnp.uint32), index)
    return x0 ^ x1


def _keep_threshold(keep_prob: float) -> int:
    """bernoulli keeps the top 23 of 32 random bits as a float u = m / 2^23 and keeps u < p:
    m < ceil(p·2^23) is the same test, and on the raw bits it is bits < ceil(p·2^23) << 9."""
    return math.ceil(float(np.float32(keep_prob)) * 2 ** 23) << 9


def dropout_mask(rng, keep_prob: float, shape) -> jax.Array:
    """The keep mask of jax.random.bernoulli(rng, keep_prob, shape), bit for bit."""
    threshold = _keep_threshold(keep_prob)
    if threshold >= 2 ** 32:
        return jnp.ones(shape, bool)
    return random_bits(rng, shape) < np.uint32(threshold)


def dropout(rng, x, keep_prob: float):
    """x / keep_prob where dropout_mask keeps it, else 0: nn.Dropout's arithmetic and mask.

    Only the mask, packed 8 to a byte, is kept for the backward pass. Left to autodiff, XLA
    would keep it as one byte per element, or re-derive it there from the random bits (keeping
    a 32-bit word per element alive); the (B, N, L, L) attention-probability masks dominate.
    """
    if _keep_threshold(keep_prob) >= 2 ** 32:
        return x
    packed = jnp.packbits(dropout_mask(rng, keep_prob, x.shape), axis=-1)
    return _scale_kept(x, packed, keep_prob)


def _select_kept(x, packed, keep_prob):
    keep = jnp.unpackbits(packed, axis=-1, count=x.shape[-1]).astype(bool)
    return jax.lax.select(keep, x / keep_prob, jnp.zeros_like(x))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _scale_kept(x, packed, keep_prob):
    return _select_kept(x, packed, keep_prob)


def _scale_kept_fwd(x, packed, keep_prob):
    return _select_kept(x, packed, keep_prob), packed


def _scale_kept_bwd(keep_prob, packed, g):  # linear in x: the same select of the gradient
    return _select_kept(g, packed, keep_prob), None


_scale_kept.defvjp(_scale_kept_fwd, _scale_kept_bwd)


class Dropout(nn.Module):
    """nn.Dropout: same name, so the same key, the same mask and the same output."""

    rate: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        if deterministic or self.rate == 0.0:
            return x
        return dropout(self.make_rng("dropout"), x, 1.0 - self.rate)
