"""The optimiser: AdamW (or LAMB) with BERT's weight-decay mask, warmup + linear decay, clipping."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import optax


def learning_rate_schedule(peak: float, warmup_steps: int, total_steps: int,
                           decay_share: float = 1.0) -> optax.Schedule:
    """0 → peak linearly over warmup_steps, then from peak at warmup_steps linearly to 0 at
    total_steps: Hugging Face's get_linear_schedule_with_warmup.

    Not google-research/bert's: its decay runs from step 0 (peak·(1 − step/total)) and the
    warm-up only overrides it while step < warmup, so the rate drops from the peak to
    peak·(1 − warmup/total) at the end of the warm-up. Ours reaches the full peak there.

    decay_share < 1 holds the peak until the last decay_share of total_steps and decays only
    over those (warm-up–stable–decay, as MiniCPM's WSD; the decay never starts before the
    warm-up ends): a short run spends longer at its highest rate.
    """
    decay_from = max(warmup_steps, total_steps - round(decay_share * total_steps))
    return optax.join_schedules(
        [optax.linear_schedule(0.0, peak, max(warmup_steps, 1)),
         optax.constant_schedule(peak),
         optax.linear_schedule(peak, 0.0, max(total_steps - decay_from, 1))],
        boundaries=[warmup_steps, decay_from])


def warmup_then_constant(peak: float, warmup_steps: int) -> optax.Schedule:
    """0 → peak linearly over warmup_steps, then peak: the step part of a time-budget run's
    rate, which `budget_scale` then decays with the clock."""
    return optax.join_schedules(
        [optax.linear_schedule(0.0, peak, max(warmup_steps, 1)), optax.constant_schedule(peak)],
        boundaries=[warmup_steps])


def budget_scale(elapsed_seconds: float, budget_seconds: float,
                 decay_share: float = 1.0) -> float:
    """The factor that takes a time-budget run's rate linearly to 0 when its budget ends, as
    the step schedule does at `steps`: 1 − elapsed/budget, floored at 0; with decay_share < 1,
    1 until the last decay_share of the budget, then linearly to 0 over it."""
    left = max(0.0, 1.0 - elapsed_seconds / budget_seconds)
    return min(1.0, left / decay_share)


def decay_mask(params):
    """Decay matrices and embeddings; never biases or LayerNorm scales (all the 1-D params)."""
    return jax.tree.map(lambda p: p.ndim >= 2, params)


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
    """optax.clip_by_global_norm (same empty state, same result to rounding) scaling by a multiply
    rather than optax's divide, which XLA will not fuse into both Adam moments: it wrote a clipped
    copy of every gradient first (one pass over the gradients less)."""

    def update(updates, state, params=None):
        del params
        norm = optax.tree.norm(updates)
        scale = jnp.where(norm < max_norm, 1.0, max_norm / norm)
        return jax.tree.map(lambda g: g * scale.astype(g.dtype), updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def lamb(schedule: optax.Schedule, b1: float, b2: float, eps: float,
         weight_decay: float) -> optax.GradientTransformation:
    """LAMB with the trust ratio on the decayed (≥2-D) params only, as NVIDIA's and Google's BERT
    recipes exclude biases and LayerNorm from it: optax.lamb's `mask` masks only the decay, and
    its trust ratio ‖p‖/‖step‖ shrinks a small bias's step by the bias's own size."""
    return optax.chain(
        optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
        optax.add_decayed_weights(weight_decay, mask=decay_mask),
        optax.masked(optax.scale_by_trust_ratio(), decay_mask),
        optax.scale_by_learning_rate(schedule))


def make_optimizer(cfg, schedule: Optional[optax.Schedule] = None, *,
                   layer_decay: float = 1.0, num_layers: int = 0
                   ) -> optax.GradientTransformation:
    """From a PretrainConfig (or any object with the same optimisation fields).

    `schedule`: the learning-rate schedule, when the caller has built it already (the job logs
    it too); None builds learning_rate_schedule from cfg. `layer_decay` < 1: each update is
    scaled by its layer's factor (layer_rate_decay; fine-tuning's config.layer_lr_decay).
    """
    if schedule is None:
        schedule = learning_rate_schedule(cfg.learning_rate, cfg.warmup_steps, cfg.steps,
                                          cfg.decay_share)
    if cfg.optimizer == "lamb":
        update = lamb(schedule, cfg.adam_b1, cfg.adam_b2, cfg.adam_eps, cfg.weight_decay)
    else:
        update = optax.adamw(schedule, b1=cfg.adam_b1, b2=cfg.adam_b2, eps=cfg.adam_eps,
                             weight_decay=cfg.weight_decay, mask=decay_mask)
    if layer_decay != 1.0:
        update = optax.chain(update, layer_rate_decay(layer_decay, num_layers))
    return optax.chain(clip_by_global_norm(cfg.max_grad_norm), update)


def layer_depth(path, num_layers: int) -> int:
    """How many encoder layers lie between a parameter and the task head: 0 for the head, the
    pooler and the top layer, L − 1 − i for encoder layer i, L for the embeddings."""
    names = [getattr(k, "key", k) for k in path]
    if names[0] != "bert" or names[1] == "pooler":
        return 0
    if names[1] == "embeddings":
        return num_layers
    return num_layers - 1 - int(names[2].removeprefix("layer_"))


def layer_rate_decay(decay: float, num_layers: int) -> optax.GradientTransformation:
    """Layer-wise rate decay (Sun et al. 2019, "How to Fine-Tune BERT for Text Classification";
    ELECTRA's and DeBERTa's recipes): a parameter's update, weight decay included, times
    decay^depth (layer_depth) — the head and the top layer at the full rate, each layer below
    at `decay` times the one above it, the embeddings at decay^L: what pretraining taught the
    lower layers moves least. optax.multi_transform of optax.scale per depth."""
    def depths(params):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: str(layer_depth(path, num_layers)), params)

    return optax.multi_transform(
        {str(d): optax.scale(decay ** d) for d in range(num_layers + 1)}, depths)


def _is_schedule_state(x) -> bool:
    return isinstance(x, optax.ScaleByScheduleState)


def skip_update(opt_state):
    """The optimiser state after a skipped update: only the schedule's count advances.

    The schedule reads its own count, so it must follow the step or the rate lags behind it
    after every skip. Adam's count stays: its bias correction 1 − β^t is right only with t the
    number of updates the moments have had, and a skipped update gave them none.
    """
    def advance(s):
        return s._replace(count=s.count + 1) if _is_schedule_state(s) else s

    return jax.tree.map(advance, opt_state, is_leaf=_is_schedule_state)


def schedule_count(opt_state, default):
    """The count the schedule will read at the next update (`default` if there is none)."""
    found = [s for s in jax.tree.leaves(opt_state, is_leaf=_is_schedule_state)
             if _is_schedule_state(s)]
    return found[0].count if found else default
