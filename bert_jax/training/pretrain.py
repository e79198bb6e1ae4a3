"""The pretraining loop: sections that each call one helper; all side effects live here.

WORKDIR gets: train_config.json and config.json (the model) at start, vocab/ (when trained
here), checkpoints/ (orbax), metrics.jsonl + tensorboard/, and export/ (a Hugging Face
directory) at the end. Running the same command again resumes from the latest checkpoint.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.checkpoints import model_dir, paths
from bert_jax.checkpoints.huggingface import save_hf
from bert_jax.data import batches, masking, text_files, tokenizer
from bert_jax.data.pretraining_examples import build_pretraining_dataset
from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig, BertForPreTraining
from bert_jax.training import checkpointer, loop, losses, optim, sharding, steps, xla_options
from bert_jax.training.metric_writer import MetricWriter, parameter_table
from bert_jax.training.pretrain_config import PretrainConfig

log = logging.getLogger("bert_jax")


def pretrain(cfg: PretrainConfig, workdir: str) -> dict[str, float]:
    """Pretrain (MLM + NSP) to cfg.steps; returns the final held-out metrics."""
    main = jax.process_index() == 0
    sharding.check_batch_size(cfg.batch_size, cfg.grad_accum_steps)  # before any slow work
    check_inputs(cfg, workdir)
    os.makedirs(workdir, exist_ok=True)
    tok = _tokenizer(cfg, workdir, main)
    config = model_config(cfg, tok.get_vocab_size(with_added_tokens=True))
    _check_workdir(workdir, cfg, config, main)
    train, heldout = _examples(cfg, tok)

    mesh = sharding.make_mesh()
    model = BertForPreTraining(config, jnp.dtype(cfg.dtype), remat=cfg.remat)
    tx = optim.make_optimizer(cfg)
    state = _init_state(model, tx, cfg, mesh)
    checkpointer = checkpointer.Checkpointer(workdir, cfg.keep_checkpoints, cfg.checkpoint_every)
    state = _restore(checkpointer, state, cfg, mesh)
    log.info("run %s\nmodel %s\n%s", json.dumps(dataclasses.asdict(cfg), sort_keys=True),
             json.dumps(config.to_dict(), sort_keys=True),
             parameter_table(jax.device_get(state.params)))

    spec = masking.MaskingSpec.from_tokenizer(tok, cfg.max_predictions_per_seq,
                                              cfg.masked_lm_prob, cfg.whole_word_masking)
    lookup = jnp.asarray(tokenizer.continuation_lookup(tok)) if cfg.whole_word_masking else None
    schedule = optim.learning_rate_schedule(cfg.learning_rate, cfg.warmup_steps, cfg.steps)
    replicated, data = sharding.replicated(mesh), sharding.data_sharded(mesh)
    step_fn = jax.jit(steps.make_pretrain_step(spec, schedule, cfg.grad_accum_steps, lookup),
                      in_shardings=(replicated, data, replicated),
                      out_shardings=(replicated, replicated), donate_argnums=(0,),
                      compiler_options=xla_options.train_step(cfg.remat, cfg.dtype))
    eval_fn = jax.jit(steps.make_pretrain_eval_step(spec, lookup),
                      in_shardings=(replicated, data, replicated), out_shardings=replicated,
                      compiler_options=xla_options.forward())
    key = sharding.replicated_key(cfg.seed, mesh)
    eval_keys = _eval_keys(key, heldout, cfg)
    writer = MetricWriter(workdir, enabled=main)
    evaluate = lambda s: _evaluate(eval_fn, s, heldout, cfg, mesh, eval_keys, writer)  # noqa
    try:
        pc, pi = jax.process_count(), jax.process_index()
        with loop.StopRequest() as stop:
            state = loop.run_steps(
                step_fn, state,
                lambda s: batches.batch_for_step(train, s, cfg.batch_size, cfg.data_seed,
                                                 process_index=pi, process_count=pc),
                until=cfg.steps, total=cfg.steps, key=key, mesh=mesh, writer=writer,
                checkpointer=checkpointer, stop=stop, log_every=cfg.log_every, desc="pretrain",
                summarize=_with_loss, postfix=("loss", "mlm_accuracy"),
                on_nonfinite=cfg.on_nonfinite,
                after_step=lambda s, st: bool(cfg.eval_every and s % cfg.eval_every == 0
                                              and s < cfg.steps and evaluate(st) is not None))
        final = evaluate(state)
        checkpointer.save(int(state.step), state, force=checkpointer.latest_step() != state.step)
        checkpointer.wait()
        if main:
            _export(workdir, config, state)
    finally:
        checkpointer.close()
        writer.close()
    return final


def check_inputs(cfg: PretrainConfig, workdir: str) -> None:
    """Read every input the run names before anything is written into the workdir, so a bad
    one leaves an existing workdir exactly as it was (and costs no slow work)."""
    for path in text_files.resolve_files(cfg.train_files):
        text_files.read_text(path)
    own = os.path.join(workdir, "vocab", "tokenizer.json")
    source = cfg.vocab or (own if os.path.isfile(own) else "")
    if source:
        vocab_size = tokenizer.load(source).get_vocab_size(with_added_tokens=True)
    elif cfg.model.endswith(".json") or os.path.sep in cfg.model:  # vocabulary trained later
        vocab_size = BertConfig.from_json_file(cfg.model).vocab_size
    else:
        vocab_size = cfg.vocab_size
    _check_workdir(workdir, cfg, model_config(cfg, vocab_size), main=False)  # writes nothing
    has_checkpoint = paths.latest_checkpoint_step(workdir) is not None
    if cfg.init_from and not has_checkpoint:  # a resumed run never reads init_from
        model_dir.load_pretrained(cfg.init_from)


def _with_loss(values: dict) -> dict:
    values["loss"] = values["mlm_loss"] + values["nsp_loss"]
    return values


def _eval_keys(key, heldout, cfg) -> list:
    """One masking key per held-out batch, made once: the same masks at every evaluation."""
    n = batches.num_examples(heldout) // cfg.batch_size
    n = min(n, cfg.eval_batches) if cfg.eval_batches else n
    eval_key = jax.random.fold_in(key, -1 % 2**31)  # a stream the train steps never use
    return [jax.random.fold_in(eval_key, i) for i in range(n)]


def _evaluate(eval_fn, state, heldout, cfg, mesh, eval_keys, writer) -> dict[str, float]:
    """Held-out MLM / NSP accuracy and perplexity over len(eval_keys) batches."""
    if not eval_keys:
        return {}
    pc, pi = jax.process_count(), jax.process_index()
    local = cfg.batch_size // pc
    per_batch = []
    for i, batch_key in enumerate(eval_keys):  # dispatched back to back; fetched once below
        rows = slice(i * cfg.batch_size + pi * local, i * cfg.batch_size + (pi + 1) * local)
        host = {k: v[rows] for k, v in heldout.items()}
        per_batch.append(eval_fn(state, sharding.global_batch(host, mesh), batch_key))
    total = functools.reduce(losses.add, sharding.fetch(per_batch))
    values = losses.means(total)
    values["loss"] = values["mlm_loss"] + values["nsp_loss"]
    values["mlm_perplexity"] = float(np.exp(values["mlm_loss"]))
    step = int(sharding.fetch(state.step))
    writer.write(step, "eval", values)
    log.info("eval step %d: mlm_accuracy %.4f, nsp_accuracy %.4f, perplexity %.2f", step,
             values["mlm_accuracy"], values["nsp_accuracy"], values["mlm_perplexity"])
    return values


def model_config(cfg: PretrainConfig, vocab_size: int) -> BertConfig:
    """The BertConfig of a run: a preset or a config.json, checked against the vocabulary."""
    if cfg.model.endswith(".json") or os.path.sep in cfg.model:
        config = BertConfig.from_json_file(cfg.model)
        if config.vocab_size != vocab_size:
            raise BertJaxError(f"{cfg.model}: vocab_size {config.vocab_size} does not match the "
                               f"vocabulary ({vocab_size} tokens)")
    else:
        config = BertConfig.preset(cfg.model, vocab_size=vocab_size)
    if cfg.dropout is not None:
        config = config.replace(hidden_dropout_prob=cfg.dropout,
                                attention_probs_dropout_prob=cfg.dropout)
    if cfg.max_seq_length > config.max_position_embeddings:
        raise BertJaxError(f"config.max_seq_length: {cfg.max_seq_length} exceeds the model's "
                           f"max_position_embeddings ({config.max_position_embeddings})")
    return config


def _tokenizer(cfg, workdir, main):
    """cfg.vocab (copied into WORKDIR/vocab), the workdir's own, or a new one trained there."""
    vocab_dir = os.path.join(workdir, "vocab")
    if cfg.vocab:
        tok = tokenizer.load(cfg.vocab)
        if main:
            tokenizer.save(tok, vocab_dir)
        return tok
    if os.path.isfile(os.path.join(vocab_dir, "tokenizer.json")):
        return tokenizer.load(os.path.join(vocab_dir, "tokenizer.json"))
    if jax.process_count() > 1:
        raise BertJaxError("config.vocab: multi-process runs need a vocabulary; train one first "
                           "with `bert-jax tokenizer`")
    log.info("training a %d-token WordPiece vocabulary into %s", cfg.vocab_size, vocab_dir)
    return tokenizer.train_tokenizer(cfg.train_files, cfg.vocab_size, vocab_dir,
                                     lowercase=cfg.lowercase)


_SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size",
                 "tie_word_embeddings")


def _check_workdir(workdir, cfg, config, main):
    """A workdir belongs to one model: refuse to resume a checkpoint of another shape."""
    path = os.path.join(workdir, "config.json")
    has_checkpoints = os.path.isdir(os.path.join(workdir, paths.CHECKPOINTS))
    if os.path.isfile(path) and has_checkpoints:
        saved = BertConfig.from_json_file(path)
        diff = [f"{name} {getattr(saved, name)} there, {getattr(config, name)} here"
                for name in _SHAPE_FIELDS if getattr(saved, name) != getattr(config, name)]
        if diff:
            raise BertJaxError(f"{workdir}: holds a checkpoint of a different model "
                               f"({'; '.join(diff[:3])}); use a new --workdir")
    if main:
        config.to_json_file(path, architectures=["BertForPreTraining"])
        with open(os.path.join(workdir, "train_config.json"), "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(cfg), f, indent=2)


def _examples(cfg, tok):
    """Cached NSP examples → (train, held-out) numpy columns, split by a seeded permutation."""
    dataset = build_pretraining_dataset(
        cfg.train_files, tok, max_seq_length=cfg.max_seq_length,
        short_seq_prob=cfg.short_seq_prob, dupe_factor=cfg.dupe_factor, seed=cfg.data_seed,
        documents=cfg.documents, num_proc=1)  # no fork once JAX runs threads; tokenizers'
    # Rust encoder is multithreaded by itself
    arrays = batches.as_arrays(dataset)
    n = batches.num_examples(arrays)
    order = np.random.default_rng([cfg.data_seed, 1]).permutation(n)
    n_eval = int(round(n * cfg.eval_fraction))
    train = {k: v[order[n_eval:]] for k, v in arrays.items()}
    heldout = {k: v[order[:n_eval]] for k, v in arrays.items()}
    if batches.num_examples(train) < cfg.batch_size:
        raise BertJaxError(f"config.train_files: {n - n_eval} training examples are fewer than "
                           f"one batch ({cfg.batch_size}); add text or lower batch_size")
    log.info("%d training and %d held-out examples of %d tokens", n - n_eval, n_eval,
             cfg.max_seq_length)
    return train, heldout


def _init_state(model, tx, cfg, mesh):
    """Parameters initialised directly into their replicated sharding."""
    ids = jnp.zeros((1, cfg.max_seq_length), jnp.int32)

    def init(key):
        params = model.init(key, ids)["params"]
        return steps.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    return jax.jit(init, out_shardings=sharding.replicated(mesh))(
        jax.random.fold_in(jax.random.key(cfg.seed), 2**31 - 2))


def _restore(checkpointer, state, cfg, mesh):
    """This run's latest checkpoint > init_from > the fresh init."""
    latest = checkpointer.latest_step()
    if latest is not None:
        log.info("resuming from %s/%d", checkpointer.directory, latest)
        return checkpointer.restore(latest, state)
    if cfg.init_from:
        params = model_dir.init_from(cfg.init_from, jax.device_get(state.params))
        params = jax.device_put(params, sharding.replicated(mesh))
        return state.replace(params=params, opt_state=state.tx.init(params))
    return state


def _export(workdir, config, state):
    """A Hugging Face directory (config.json, model.safetensors, vocab) beside the weights."""
    vocab_dir = os.path.join(workdir, "vocab")
    vocab_files = [os.path.join(vocab_dir, f) for f in os.listdir(vocab_dir)]
    save_hf(os.path.join(workdir, "export"), config, sharding.fetch(state.params), vocab_files,
            overwrite=True)
    log.info("exported a Hugging Face BertForPreTraining to %s", os.path.join(workdir, "export"))
