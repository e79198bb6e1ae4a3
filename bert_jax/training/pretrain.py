"""The pretraining job (MLM + NSP, or packed MLM), the runner: inputs checked, the workdir
set up, then the parts (training/pretrain_parts.py: model, optimiser, steps, data) run in the
shared skeleton (loop, evaluations, checkpoints, logs, export).

WORKDIR gets: train_config.json and config.json (the model) at start, vocab/ (trained or copied
here), checkpoints/ (orbax), metrics.jsonl + tensorboard/, and export/ (a Hugging Face
BertForPreTraining directory) at the end. Running the same command again resumes from the
latest checkpoint.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os

import jax
import numpy as np

from bert_jax.model_files import atomic, model_dir, paths
from bert_jax.model_files.huggingface import save_hf
from bert_jax.data import prepared_set, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig
from bert_jax.runtime import multihost, rng, sharding
from bert_jax.runtime.metric_writer import parameter_table
from bert_jax.training import (loop, losses, model_card, pretrain_config, pretrain_corpus,
                               pretrain_parts, probe, run, run_record, time_budget)

log = logging.getLogger("bert_jax")


def pretrain(cfg: pretrain_config.PretrainConfig, workdir: str, on_start=None) -> run.JobResult:
    """Pretrain to cfg.steps (or the time budget); the result's metrics are the final held-out
    ones. `on_start()` is called once the inputs are checked and training begins."""
    cfg = pretrain_config.validate(cfg)  # also when called from Python, not the CLI
    sharding.check_batch_size(cfg.batch_size, cfg.grad_accum_steps)  # before any slow work
    pretrained = check_inputs(cfg, workdir)  # init_from's params, read once (None: none)
    cap = pretrain_config.prediction_cap(cfg)
    if cap:
        log.warning("%s", cap)
    main = jax.process_index() == 0
    if main:  # process 0 writes the workdir; the others' (maybe their own disks) stay empty
        os.makedirs(workdir, exist_ok=True)
    tok = _tokenizer(cfg, workdir, main)
    parts = pretrain_parts.build(cfg, tok)
    items = launch_items(cfg, parts.config, tok, parts.data)
    multihost.check_same_launch(items)
    _check_workdir(workdir, cfg, parts.config, main, run_record.inputs_of(items))

    config, heldout = parts.config, parts.heldout
    with run.run_context(workdir, cfg.seed, cfg.keep_checkpoints, cfg.checkpoint_every,
                         cfg.checkpoint_dir, on_start) as ctx:
        state = run.init_state(ctx, parts.model, parts.tx, max_seq_length=cfg.max_seq_length,
                               seed=cfg.seed, pretrained=pretrained, source=cfg.init_from,
                               start=parts.start)
        del pretrained
        state = run.restore_latest(ctx, state)
        log.info("run %s\nmodel %s\n%s", json.dumps(dataclasses.asdict(cfg), sort_keys=True),
                 json.dumps(config.to_dict(), sort_keys=True),
                 parameter_table(sharding.fetch(state.params)))

        clock = None
        if cfg.time_budget_minutes:
            clock = time_budget.Clock(cfg.time_budget_minutes, workdir, main, cfg.decay_share)
            clock.resume(int(sharding.fetch(state.step)))
        step_fn = parts.train_step if clock is None else (
            lambda st, batch, key: parts.train_step(
                st, batch, key, sharding.replicated_scalar(clock.rate_scale(), ctx.mesh)))
        count = run.num_eval_batches(len(heldout["input_ids"]), cfg.batch_size,
                                     cfg.eval_batches)
        prober = probe.prober(cfg, config, tok, ctx.writer, main)
        evaluate = functools.partial(_evaluate, ctx, parts.eval_step, heldout, cfg.batch_size,
                                     rng.eval_keys(ctx.key, count), prober)
        if prober is not None and int(sharding.fetch(state.step)) == 0:
            prober(0, state)  # the initial weights' score: what the run has to beat
        pc, pi = jax.process_count(), jax.process_index()
        phase = pretrain_parts.phase_of(cfg, clock)
        state = loop.run_steps(
            ctx, step_fn, state, lambda s: parts.train_batch(s, phase(s), pi, pc),
            until=cfg.steps, total=cfg.steps, log_every=cfg.log_every, desc="pretrain",
            summarize=losses.total_loss, postfix=("loss", "mlm_accuracy"),
            on_nonfinite=cfg.on_nonfinite,
            after_step=lambda s, st: bool(cfg.eval_every and s % cfg.eval_every == 0
                                          and s < cfg.steps and evaluate(st)),
            should_stop=None if clock is None else lambda s: _budget_spent(clock, s),
            on_save=None if clock is None else clock.record)
        final = evaluate(state)
        step = int(sharding.fetch(state.step))
        if ctx.checkpointer.save(step, state, force=ctx.checkpointer.latest_step() != step) \
                and clock is not None:
            clock.record(step)
        ctx.checkpointer.wait()
        if main:
            _export(workdir, config, state)
            model_card.write_pretrain_card(os.path.join(workdir, paths.EXPORT), cfg, workdir,
                                           step)
    return run.JobResult(workdir, step, final, workdir, os.path.join(workdir, paths.EXPORT),
                         ctx.checkpointer.directory)


def _budget_spent(clock, step: int) -> bool:
    clock.tick()
    if clock.expired():
        log.info("time budget of %.1f minutes spent at step %d; stopping", clock.budget / 60,
                 step)
        return True
    return False


def check_inputs(cfg: pretrain_config.PretrainConfig, workdir: str):
    """Check every input the run names before anything is written into the workdir, so a bad
    one leaves an existing workdir exactly as it was (and costs no slow work): a prepared set
    is verified, raw text files must exist (their text is read, streamed, when the data is
    prepared, before the workdir's config is written). Returns the
    params of cfg.init_from, or None when there is none or the run resumes (it never reads
    init_from then)."""
    pretrain_corpus.check(cfg)
    if cfg.probe_file and not os.path.isfile(cfg.probe_file):
        raise BertJaxError(f"config.probe_file {cfg.probe_file}: file not found (a labelled "
                           f"csv / tsv / json / jsonl / parquet file)")
    own = _own_vocab(workdir)
    source = cfg.vocab or (own if os.path.isfile(own) else "") or pretrain_corpus.vocab_of_set(cfg)
    if source:
        vocab_size = tokenizer.load(source).get_vocab_size(with_added_tokens=True)
    elif pretrain_parts.model_is_file(cfg):  # the vocabulary is trained later: the config's
        vocab_size = BertConfig.from_json_file(cfg.model).vocab_size
    else:
        vocab_size = cfg.vocab_size
    _check_workdir(workdir, cfg, pretrain_parts.model_config(cfg, vocab_size),
                   main=False)  # writes nothing
    if cfg.init_from and paths.latest_checkpoint_step(workdir, cfg.checkpoint_dir) is None:
        return model_dir.load_pretrained(cfg.init_from)[1]
    return None


def _own_vocab(workdir: str) -> str:
    return os.path.join(workdir, paths.VOCAB, "tokenizer.json")


def _tokenizer(cfg, workdir, main):
    """cfg.vocab or a prepared set's (copied into WORKDIR/vocab), the workdir's own, or a new
    one trained there."""
    vocab_dir = os.path.join(workdir, paths.VOCAB)
    given = cfg.vocab or pretrain_corpus.vocab_of_set(cfg)
    if given:
        tok = tokenizer.load(given)
        if main:
            tokenizer.save(tok, vocab_dir)
        return tok
    if os.path.isfile(_own_vocab(workdir)):
        return tokenizer.load(_own_vocab(workdir))
    if jax.process_count() > 1:
        raise BertJaxError("config.vocab: multi-process runs need a vocabulary; train one first "
                           "with `bert-jax tokenizer`")
    log.info("training a %d-token WordPiece vocabulary into %s", cfg.vocab_size, vocab_dir)
    return tokenizer.train_tokenizer(cfg.train_files, cfg.vocab_size, vocab_dir,
                                     lowercase=cfg.lowercase)


_SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size",
                 "tie_word_embeddings")


def _check_workdir(workdir, cfg, config, main, inputs=None):
    """A workdir holds one run: refuse to resume a checkpoint of another shape, or with
    settings that change what it computes (training/run_record.py; `inputs` None: the config
    fields only, before the data is read); then process 0 saves the model and the record."""
    path = os.path.join(workdir, paths.CONFIG)
    if os.path.isfile(path) and os.path.isdir(paths.checkpoint_dir(workdir, cfg.checkpoint_dir)):
        saved = BertConfig.from_json_file(path)
        diff = [f"{name} {getattr(saved, name)} there, {getattr(config, name)} here"
                for name in _SHAPE_FIELDS if getattr(saved, name) != getattr(config, name)]
        if diff:
            raise BertJaxError(f"{workdir}: holds a checkpoint of a different model "
                               f"({'; '.join(diff[:3])}); use a new workdir")
    saved = os.path.join(workdir, paths.TRAIN_CONFIG)
    record = run_record.check_resume(
        workdir, saved, cfg, inputs, pretrain_config.RESUMABLE,
        paths.checkpoint_dir(workdir, cfg.checkpoint_dir))
    if main:
        with atomic.atomic_file(path) as tmp:
            config.to_json_file(tmp, architectures=["BertForPreTraining"])
        run_record.save(saved, record)


def launch_items(cfg, config: BertConfig, tok, data: dict) -> dict[str, str]:
    """multihost.launch_items of a pretraining run: its training data is each length's
    prepared set, summed up by its manifest's content (not its paths)."""
    sets = {}
    for length, d in data.items():
        m = d.data.manifest
        content = dict(vocab=m["vocab_hash"], version=m["format_version"], parts=[
            [(p["bytes"], p["tokens"]) for p in shard["parts"]] for shard in m["shards"]])
        sets[f"the training data of {length} tokens"] = (
            f"{m['documents']:,} documents, {m['tokens']:,} tokens "
            f"({multihost.digest(content)})")
    return multihost.launch_items(cfg, config, prepared_set.vocab_hash(tok), sets)


def _evaluate(ctx, eval_fn, heldout, batch_size, keys, prober, state) -> dict[str, float]:
    """Held-out MLM / NSP accuracy and perplexity over len(keys) batches (the last one may be
    partial: its padding rows weigh nothing), and the probe's score (probe/<name>)."""
    step = int(sharding.fetch(state.step))
    values = {}
    if keys:
        per_batch, _ = run.eval_outputs(ctx, eval_fn, state, heldout, batch_size, keys=keys,
                                        max_batches=len(keys))
        values = losses.total_loss(losses.means(functools.reduce(losses.add, per_batch)))
        values["mlm_perplexity"] = float(np.exp(values["mlm_loss"]))
        ctx.writer.write(step, "eval", values)
        log.info("eval step %d: %s", step, summary(values))
    if prober is not None:
        values.update({f"probe/{k}": v for k, v in prober(step, state).items()})
    return values


def summary(values: dict) -> str:
    """Held-out MLM accuracy, NSP accuracy (with the NSP objective) and perplexity."""
    parts = [f"MLM accuracy {values['mlm_accuracy']:.4f}"]
    if "nsp_accuracy" in values:
        parts.append(f"NSP accuracy {values['nsp_accuracy']:.4f}")
    return ", ".join(parts + [f"perplexity {values['mlm_perplexity']:.2f}"])


def _export(workdir, config, state):
    """A Hugging Face directory (config.json, model.safetensors, vocab) beside the weights."""
    export = os.path.join(workdir, paths.EXPORT)
    save_hf(export, config, sharding.fetch(state.params), paths.vocab_files(workdir),
            overwrite=True)
    log.info("exported a Hugging Face BertForPreTraining to %s", export)
