"""Pure steps: (state, batch, key) → (state, metrics). No I/O, no globals; jitted by the caller.

Randomness is the step's stream, rng.step_key(key, state.step), so a resumed run draws the same
masks and dropout as an uninterrupted one. Metrics are (sum, denominator) pairs (see losses.py).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from bert_jax.data import masking
from bert_jax.data.pretraining_batches import OBJECTIVES, PAIRED
from bert_jax.errors import BertJaxError
from bert_jax.runtime import rng
from bert_jax.training import losses, optim

TrainState = train_state.TrainState  # step, params, opt_state; apply_fn and tx are static


def micro_batches(batch: dict, k: int) -> dict:
    """(B, …) → (k, B/k, …), micro-batch j = rows j, j+k, j+2k, …

    Interleaved rather than contiguous: each device's rows of the data-sharded batch hold an
    equal share of every micro-batch, so splitting moves no data between devices.
    """
    return jax.tree.map(lambda x: x.reshape(x.shape[0] // k, k, *x.shape[1:]).swapaxes(0, 1),
                        batch)


def accumulate_gradients(loss_fn: Callable, params, batch: dict, key, k: int):
    """Σ_j ∇loss_fn(params, micro_j, fold_in(key, j)) and the summed metrics, over k micro-batches.

    `loss_fn(params, batch, key) -> (loss, metrics)` must already be normalised by the whole
    batch's denominators, so the sum equals the full-batch gradient exactly.
    """
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    if k == 1:
        (_, metrics), grads = grad_fn(params, batch, jax.random.fold_in(key, 0))
        return grads, metrics
    micro = micro_batches(batch, k)
    first = jax.tree.map(lambda x: x[0], micro)
    metric_shapes = jax.eval_shape(lambda: grad_fn(params, first, key)[0][1])
    zeros = (jax.tree.map(jnp.zeros_like, params),
             jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metric_shapes))

    def body(carry, xs):
        j, mb = xs
        (_, m), g = grad_fn(params, mb, jax.random.fold_in(key, j))
        return (jax.tree.map(jnp.add, carry[0], g), losses.add(carry[1], m)), None

    (grads, metrics), _ = jax.lax.scan(body, zeros, (jnp.arange(k), micro))
    return grads, metrics


def apply_update(state: TrainState, grads, metrics: dict, schedule: Callable,
                 rate_scale: Optional[jax.Array] = None):
    """One optimiser update, skipped when the loss or gradient is not finite (state kept, but
    the schedule's count advances with the step: see optim.skip_update).

    `rate_scale` (a scalar, or None for 1) multiplies the update: AdamW's and LAMB's last
    transformation is the learning rate, so this is the rate schedule(count) · rate_scale, with
    the decoupled weight decay scaled alike. A time-budget run passes the share of its budget
    still left here (optim.budget_scale).
    Metrics gain grad_norm, learning_rate (the rate this update applies, read at the
    schedule's own count) and `nonfinite` (1 when the update was skipped).
    """
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(grad_norm)
    for total, _ in metrics.values():
        finite &= jnp.isfinite(total)

    def update(s, g):
        if rate_scale is None:
            return s.apply_gradients(grads=g)
        updates, opt_state = s.tx.update(g, s.opt_state, s.params)
        updates = jax.tree.map(lambda u: u * rate_scale.astype(u.dtype), updates)
        return s.replace(params=optax.apply_updates(s.params, updates), opt_state=opt_state)

    # cond, not a where over old and new state: the update then writes in place into the donated
    # buffers (the where kept new params and moments beside the old, costing memory and time)
    new_state = jax.lax.cond(
        finite, update,
        lambda s, g: s.replace(opt_state=optim.skip_update(s.opt_state)), state, grads)
    new_state = new_state.replace(step=state.step + 1)
    learning_rate = schedule(optim.schedule_count(state.opt_state, state.step))
    if rate_scale is not None:
        learning_rate = learning_rate * rate_scale
    metrics = dict(metrics, grad_norm=(grad_norm, 1.0), learning_rate=(learning_rate, 1.0),
                   nonfinite=(1.0 - finite.astype(jnp.float32), 1.0))
    return new_state, metrics


def train_masks(key, step, batch: dict, spec: masking.MaskingSpec,
                continuation_lookup: Optional[jax.Array] = None) -> tuple[dict, jax.Array]:
    """(the masked batch of train step `step`, its dropout key), both from fold_in(key, step):
    the pretraining step's own draw, callable outside it (bench/time_to_accuracy.py feeds
    PyTorch the very masks the step trains on)."""
    mask_key, dropout_key = jax.random.split(rng.step_key(key, step))
    return masking.mask_batch(mask_key, batch, spec, continuation_lookup), dropout_key


def make_pretrain_step(spec: masking.MaskingSpec, schedule: Callable, grad_accum_steps: int = 1,
                       continuation_lookup: Optional[jax.Array] = None,
                       objective: str = "mlm+nsp"):
    """pretrain_step(state, batch, key[, rate_scale]): mask inside the step, the objective's
    loss, one update (its rate times `rate_scale` when given: see apply_update).

    `batch`: input_ids, token_type_ids, attention_mask (B, L), and for "mlm+nsp"
    next_sentence_labels (B,). With "mlm" the loss is MLM alone: the model still computes NSP
    logits, but its NSP head gets no gradient.
    """
    nsp = _uses_nsp(objective)

    def pretrain_step(state: TrainState, batch: dict, key, rate_scale=None):
        batch, dropout_key = train_masks(key, state.step, batch, spec, continuation_lookup)
        mlm_total = jnp.maximum(batch["masked_lm_weights"].sum(), 1.0)
        nsp_total = batch["input_ids"].shape[0]

        def loss_fn(params, micro, key):
            metrics = pretraining_metrics(state.apply_fn, params, micro, False, key, nsp=nsp)
            loss = metrics["mlm_loss"][0] / mlm_total
            if nsp:
                loss = loss + metrics["nsp_loss"][0] / nsp_total
            return loss, metrics

        grads, metrics = accumulate_gradients(loss_fn, state.params, batch, dropout_key,
                                              grad_accum_steps)
        return apply_update(state, grads, metrics, schedule, rate_scale)

    return pretrain_step


def _uses_nsp(objective: str) -> bool:
    """True for the pair objectives (mlm+nsp, mlm+sop: the same binary [CLS] head, whose
    nsp_* metrics are then sentence order's), False for "mlm"; anything else is refused."""
    if objective not in OBJECTIVES:
        raise BertJaxError(f"objective: expected {', '.join(OBJECTIVES)}, got {objective!r}")
    return objective in PAIRED


def pretraining_metrics(apply_fn, params, batch: dict, deterministic: bool, dropout_key=None,
                        nsp: bool = True):
    """MLM (and, with `nsp`, NSP) (sum, denominator) metrics of BertForPreTraining on a masked
    batch; without `nsp` the batch needs no next_sentence_labels and no nsp_* metric is made.

    An evaluation batch's `example_weights` (B,) zero the padding rows of its last batch.
    """
    mlm_logits, nsp_logits = apply_fn(
        {"params": params}, batch["input_ids"], batch["token_type_ids"],
        batch["attention_mask"], batch["masked_lm_positions"], deterministic=deterministic,
        rngs=None if deterministic else {"dropout": dropout_key})
    rows = batch.get("example_weights")
    mlm_weights = batch["masked_lm_weights"]
    if rows is not None:
        mlm_weights = mlm_weights * rows[:, None]
    metrics = losses.mlm(mlm_logits, batch["masked_lm_ids"], mlm_weights)
    if nsp:
        metrics.update(losses.classification(nsp_logits, batch["next_sentence_labels"], "nsp",
                                             weights=rows))
    return metrics


def make_pretrain_eval_step(spec: masking.MaskingSpec,
                            continuation_lookup: Optional[jax.Array] = None,
                            objective: str = "mlm+nsp"):
    """eval_step(state, batch, key): masks drawn from `key` (fixed per eval batch), no dropout;
    the objective's metrics (no nsp_* ones for "mlm")."""
    nsp = _uses_nsp(objective)

    def eval_step(state: TrainState, batch: dict, key):
        batch = masking.mask_batch(key, batch, spec, continuation_lookup)
        return pretraining_metrics(state.apply_fn, state.params, batch, True, nsp=nsp)

    return eval_step


def make_finetune_step(schedule: Callable, task_loss: Callable):
    """finetune_step(state, batch, key): the task model's loss, one update.

    `batch`: input_ids, token_type_ids, attention_mask ((B, L), or (B, C, L) for multiple
    choice) and the targets `task_loss(outputs, batch)` reads; it returns {"loss", "accuracy"}
    as (sum, denominator) over the whole batch, the loss minimised is their mean. Dropout draws
    from fold_in(key, state.step).
    """

    def finetune_step(state: TrainState, batch: dict, key):
        dropout_key = rng.step_key(key, state.step)

        def loss_fn(params, batch, key):
            outputs = state.apply_fn({"params": params}, batch["input_ids"],
                                     batch["token_type_ids"], batch["attention_mask"],
                                     deterministic=False, rngs={"dropout": key})
            metrics = task_loss(outputs, batch)
            total, count = metrics["loss"]
            return total / jnp.maximum(count, 1.0), metrics

        grads, metrics = accumulate_gradients(loss_fn, state.params, batch, dropout_key, 1)
        return apply_update(state, grads, metrics, schedule)

    return finetune_step


def task_logits(state: TrainState, batch: dict):
    """Eval: the task model's float32 logits, no dropout ((B, C); (B, L, C) for tags; a
    (start, end) pair of (B, L) for spans); metrics are computed on the host from these."""
    return state.apply_fn({"params": state.params}, batch["input_ids"], batch["token_type_ids"],
                          batch["attention_mask"], deterministic=True)
