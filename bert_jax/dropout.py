"""Dropout whose masks equal nn.Dropout's bit for bit but cost a fraction as much on CPU.

jax.random.bernoulli draws threefry2x32 bits through a rolled 5-iteration loop on CPU: each
iteration writes two uint32 arrays the size of the mask, so a BERT-base step spent about 8% of
its time drawing dropout masks. Here the same hash is unrolled into one elementwise fusion over
the element index, and compared with the keep threshold as an integer.
"""

from __future__ import annotations

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


def dropout_mask(rng, keep_prob: float, shape) -> jax.Array:
    """The keep mask of jax.random.bernoulli(rng, keep_prob, shape), bit for bit.

    bernoulli keeps the top 23 of 32 random bits as a float u = m / 2^23 and keeps u < p;
    m < ceil(p·2^23), tested on the raw bits with the threshold shifted into place, is the same
    test. The mask is then packed 8 to a byte and unpacked where it is used: otherwise XLA
    re-derives it in the backward pass, keeping a 32-bit word per element alive, not one bit.
    """
    steps = math.ceil(float(np.float32(keep_prob)) * 2 ** 23)
    if steps >= 2 ** 23:
        return jnp.ones(shape, bool)
    keep = random_bits(rng, shape) < np.uint32(steps << 9)
    return jnp.unpackbits(jnp.packbits(keep, axis=-1), axis=-1, count=shape[-1]).astype(bool)


class Dropout(nn.Module):
    """nn.Dropout (same name, so the same key and the same mask) with a dropout_mask."""

    rate: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        if deterministic or self.rate == 0.0:
            return x
        keep_prob = 1.0 - self.rate
        mask = dropout_mask(self.make_rng("dropout"), keep_prob, x.shape)
        return jax.lax.select(mask, x / keep_prob, jnp.zeros_like(x))
