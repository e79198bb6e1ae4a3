"""What one pretraining step is made of, built from a config alone: the model, its optimiser
and schedule, the masks, the jitted train and evaluation steps and the batches.

`pretrain()` (training/pretrain.py) runs these parts (loop, checkpoints, logs); the benchmarks
time the very same ones (bench/time_to_accuracy.py), so the job and what is measured cannot
drift apart. `build` writes nothing: its one slow part is preparing the data (cached).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from bert_jax.data import masking, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig, BertForPreTraining
from bert_jax.runtime import rng, sharding
from bert_jax.training import (initial_params, optim, pretrain_config, pretrain_corpus, run,
                               steps)

log = logging.getLogger("bert_jax")


@dataclasses.dataclass(frozen=True)
class PretrainParts:
    """One pretraining run's pieces; `build` makes them."""

    cfg: pretrain_config.PretrainConfig
    config: BertConfig  # the model's
    tok: object  # the tokenizer
    model: BertForPreTraining
    schedule: optax.Schedule  # the step's learning rate (a time budget scales it further)
    tx: optax.GradientTransformation
    spec: masking.MaskingSpec  # training masks
    heldout_spec: masking.MaskingSpec  # held-out masks (15% whatever the training rate)
    lookup: Optional[jax.Array]  # whole-word masking's continuation lookup (None: off)
    train_step: Callable  # jitted (state, batch, key[, rate_scale]) → (state, metrics)
    eval_step: Callable  # jitted (state, batch, key) → metric sums, masks drawn from key
    data: dict  # sequence length → PretrainingBatches (one per phase)
    heldout: dict  # held-out rows at max_seq_length, fixed for the run

    def start(self, params: dict) -> dict:
        """A fresh init as the run starts it (position init, mimetic attention)."""
        return initial_params.starting_params(params, self.config, self.cfg)

    def fresh_params(self) -> dict:
        """The run's initial weights without init_from: drawn from its init key exactly as
        run.init_state draws them, on one device."""
        ids = jnp.zeros((1, self.cfg.max_seq_length), jnp.int32)
        return jax.jit(lambda key: self.start(self.model.init(key, ids)["params"]))(
            rng.init_key(self.cfg.seed))

    def train_batch(self, step: int, length: int, process_index: int = 0,
                    process_count: int = 1) -> dict:
        """This process's rows of step `step`'s batch of `length` tokens (host numpy)."""
        return self.data[length].train_batch(step, self.cfg.batch_size, process_index,
                                             process_count)


def build(cfg: pretrain_config.PretrainConfig, tok, config: Optional[BertConfig] = None,
          data: Optional[tuple] = None, mesh=None) -> PretrainParts:
    """The parts of a run of `cfg` with tokenizer `tok`: `config` (default model_config's),
    `data` (default examples(cfg, tok): (batches by length, held-out rows)), the steps jitted
    on `mesh` (default every device); the train step takes a rate scale when cfg has a time
    budget."""
    config = config or model_config(cfg, tok.get_vocab_size(with_added_tokens=True))
    data, heldout = data or examples(cfg, tok)
    mesh = mesh or sharding.make_mesh()
    model = BertForPreTraining(config, jnp.dtype(cfg.dtype), remat=cfg.remat)
    schedule = learning_rate_schedule(cfg)
    spec, held = masking_spec(cfg, tok), heldout_masking_spec(cfg, tok)
    lookup = jnp.asarray(tokenizer.continuation_lookup(tok)) if cfg.whole_word_masking else None
    train_step = run.jit_train_step(
        mesh, steps.make_pretrain_step(spec, schedule, cfg.grad_accum_steps, lookup,
                                       cfg.objective), cfg.remat, cfg.dtype,
        rate_scale=bool(cfg.time_budget_minutes))
    eval_step = run.jit_eval(mesh, steps.make_pretrain_eval_step(held, lookup, cfg.objective),
                             takes_key=True)
    return PretrainParts(cfg, config, tok, model, schedule, optim.make_optimizer(cfg, schedule),
                         spec, held, lookup, train_step, eval_step, data, heldout)


def learning_rate_schedule(cfg: pretrain_config.PretrainConfig):
    """Warm-up then linear decay to 0 at cfg.steps; with a time budget, warm-up then the peak,
    which the clock's rate_scale takes to 0 when the budget ends."""
    if cfg.time_budget_minutes:
        return optim.warmup_then_constant(cfg.learning_rate, cfg.warmup_steps)
    return optim.learning_rate_schedule(cfg.learning_rate, cfg.warmup_steps, cfg.steps,
                                        cfg.decay_share)


def masking_spec(cfg: pretrain_config.PretrainConfig, tok) -> masking.MaskingSpec:
    """Training masks: cfg.masked_lm_prob, P from cfg.predictions_per_seq at max_seq_length
    (the longer phase's, so one spec serves both phases)."""
    return masking.MaskingSpec.from_tokenizer(tok, cfg.predictions_per_seq(),
                                              cfg.masked_lm_prob, cfg.whole_word_masking)


def heldout_masking_spec(cfg: pretrain_config.PretrainConfig, tok) -> masking.MaskingSpec:
    """Held-out masks at 15% whatever the training rate, so runs masked at other rates are
    scored on the same task."""
    prob = pretrain_config.HELDOUT_MASKED_LM_PROB
    return masking.MaskingSpec.from_tokenizer(tok, cfg.predictions_per_seq(0, prob), prob,
                                              cfg.whole_word_masking)


def phase_of(cfg: pretrain_config.PretrainConfig, clock=None):
    """step → the sequence length its batch has: phase1_seq_length for the first
    phase1_share of the steps (or of the time budget, read from the clock at the step's
    tick), max_seq_length after; max_seq_length throughout with one phase."""
    if not cfg.phase1_seq_length:
        return lambda step: cfg.max_seq_length
    if clock is not None:
        return lambda step: (cfg.phase1_seq_length if clock.share() < cfg.phase1_share
                             else cfg.max_seq_length)
    first = round(cfg.phase1_share * cfg.steps)
    return lambda step: cfg.phase1_seq_length if step < first else cfg.max_seq_length


def model_config(cfg: pretrain_config.PretrainConfig, vocab_size: int) -> BertConfig:
    """The BertConfig of a run: a preset or a config.json, checked against the vocabulary."""
    if model_is_file(cfg):
        config = BertConfig.from_json_file(cfg.model)
        if config.vocab_size != vocab_size:
            raise BertJaxError(f"{cfg.model}: vocab_size {config.vocab_size} does not match the "
                               f"vocabulary ({vocab_size} tokens)")
    else:
        config = BertConfig.preset(cfg.model, vocab_size=vocab_size)
    if cfg.dropout is not None:
        config = config.replace(hidden_dropout_prob=cfg.dropout,
                                attention_probs_dropout_prob=cfg.dropout)
    if cfg.initializer_range is not None:
        config = config.replace(initializer_range=cfg.initializer_range)
    if cfg.max_seq_length > config.max_position_embeddings:
        raise BertJaxError(f"config.max_seq_length: {cfg.max_seq_length} exceeds the model's "
                           f"max_position_embeddings ({config.max_position_embeddings})")
    return config


def model_is_file(cfg: pretrain_config.PretrainConfig) -> bool:
    """config.model names a config.json rather than a preset."""
    return cfg.model.endswith(".json") or os.path.sep in cfg.model


def examples(cfg, tok):
    """The run's data, by sequence length (one per phase; prepared now, or read prepared),
    and its held-out rows at max_seq_length: whole documents (or a document's tail) that
    training never sees, fixed for the run."""
    lengths = sorted({cfg.max_seq_length, cfg.phase1_seq_length or cfg.max_seq_length})
    data = {n: pretrain_corpus.open_data(cfg.replace(max_seq_length=n), tok) for n in lengths}
    for n in lengths:
        rows = data[n].epoch_rows(0)
        if rows < cfg.batch_size:
            raise BertJaxError(f"config.train_files: {rows} training examples of {n} tokens are "
                               f"fewer than one batch ({cfg.batch_size}); add text or lower "
                               f"batch_size")
    heldout = data[cfg.max_seq_length].heldout(cfg.eval_batches * cfg.batch_size)
    rows = data[cfg.max_seq_length].epoch_rows(0)
    log.info("%d training examples in epoch 0 (%s, redrawn every epoch) and %d held-out "
             "examples of %d tokens", rows, cfg.objective, len(heldout["input_ids"]),
             cfg.max_seq_length)
    log.info("uneven data: each epoch's last examples that do not fill a batch of %d are "
             "dropped (%d of epoch 0), and the last held-out batch is padded, its padding "
             "weighted 0; each of the %d process(es) reads its %d rows of every global batch, "
             "so all take the same steps", cfg.batch_size, rows % cfg.batch_size,
             jax.process_count(), cfg.batch_size // jax.process_count())
    if not len(heldout["input_ids"]) and cfg.eval_fraction > 0:
        log.warning("config.eval_fraction %g holds out no examples: nothing is evaluated",
                    cfg.eval_fraction)
    return data, heldout
