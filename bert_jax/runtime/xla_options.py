"""XLA compiler options for each kind of jitted function, each kept because a benchmark showed it.

Passed per function (`jax.jit(..., compiler_options=...)`), never through XLA_FLAGS, so a
user's own flags and other JAX code in the process are left alone. Empty off CPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def train_step(remat: bool, dtype="float32") -> dict:
    """On CPU, with remat or a low-precision dtype: XLA's memory-optimised scheduler.

    With remat, the default schedule runs the recomputation early, so the recomputed activations
    live about as long as the ones remat dropped and remat saves next to nothing. In bfloat16
    the default schedule keeps the float32 copies made for the weight-gradient matmuls alive
    together. Not for plain float32: there it saves a little memory for a slower step.
    (Figures: bench/RESULTS.md.)
    """
    if (remat or jnp.dtype(dtype) != jnp.float32) and jax.default_backend() == "cpu":
        return {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}
    return {}


def forward(dtype=None) -> dict:
    """For forward-only functions (eval, predict, embed) on CPU.

    float32 (predict, embed, fill-mask): no YNNPACK at all. XLA's own (Eigen) matmuls are as
    fast or faster at every BERT shape measured, most at MiniLM's widths (384, 1536).
    bfloat16, or a dtype the caller does not know (None: eval inside a job of either dtype):
    YNNPACK for single matmuls only (Eigen has no bfloat16 kernels). By default XLA:CPU also
    hands YNNPACK whole matmul + LayerNorm + GELU graphs, for which it materialises every
    broadcast constant at full size: a slower forward at small sizes, no faster at base. The
    train step is faster with the default, so this is for forward passes only. (Figures:
    bench/RESULTS.md.)"""
    if jax.default_backend() != "cpu":
        return {}
    if dtype is not None and jnp.dtype(dtype) == jnp.float32:
        return {"xla_cpu_experimental_ynn_fusion_type": ""}
    return {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
