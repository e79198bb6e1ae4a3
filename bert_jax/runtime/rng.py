"""The named PRNG streams of a run: every random draw derives from jax.random.key(seed).

  step s      fold_in(key, s): masks and dropout of train step s (s = 0, 1, …), so a resumed
              run draws what an uninterrupted one would
  INIT        fold_in(key, INIT): initial parameters (a fresh head on a pretrained encoder too)
  HEAD        fold_in(key, HEAD): a fresh head redrawn from another distribution (head_init)
  EVAL        fold_in(key, EVAL): held-out masks, fold_in(·, i) for evaluation batch i, the
              same at every evaluation

HEAD, INIT and EVAL sit at the top of fold_in's 31-bit range, where no step number reaches. Data
order has its own seed (batches: numpy's generator seeded by (data seed, epoch)).
"""

from __future__ import annotations

import jax

HEAD = 2**31 - 3
INIT = 2**31 - 2
EVAL = 2**31 - 1


def run_key(seed: int) -> jax.Array:
    return jax.random.key(seed)


def init_key(seed: int) -> jax.Array:
    """The key parameters are initialised from."""
    return jax.random.fold_in(run_key(seed), INIT)


def head_key(seed: int) -> jax.Array:
    """The key a fresh head is redrawn from (fine-tuning's head_init="normal")."""
    return jax.random.fold_in(run_key(seed), HEAD)


def step_key(key: jax.Array, step) -> jax.Array:
    """The key of train step `step` (a traced value inside the jitted step)."""
    return jax.random.fold_in(key, step)


def eval_keys(key: jax.Array, count: int) -> list[jax.Array]:
    """One key per evaluation batch, made once: the same masks at every evaluation."""
    stream = jax.random.fold_in(key, EVAL)
    return [jax.random.fold_in(stream, i) for i in range(count)]
