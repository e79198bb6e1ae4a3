"""A 2-D Dense: `flax.linen.Dense`'s parameters and float32 result, multiplied as one matrix.

With 3-D activations XLA:CPU transposes the output gradient into a copy before the
weight-gradient matmul; with (tokens, F) matrices it contracts the token axis in place (the
speed-up is in bench/RESULTS.md). In a low-precision dtype the product accumulates in float32
(ops.matmul.einsum), the bias is added in float32 and the sum is rounded to that dtype.
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models.ops import matmul


class Dense(nn.Module):
    """nn.Dense (same parameter names, shapes and init) for (…, F) inputs."""

    features: int
    dtype: jnp.dtype = jnp.float32
    use_bias: bool = True
    kernel_init: Callable = nn.initializers.lecun_normal()
    bias_init: Callable = nn.initializers.zeros

    @nn.compact
    def __call__(self, inputs):
        kernel = self.param("kernel", self.kernel_init, (inputs.shape[-1], self.features),
                            jnp.float32)
        y = matmul.einsum("tf,fo->to", inputs.reshape(-1, inputs.shape[-1]), kernel, self.dtype)
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return y.reshape(*inputs.shape[:-1], self.features).astype(self.dtype)
