"""The fine-tuning job: a pretrained encoder + a fresh classifier, trained epoch by epoch with
the shared step loop, scored on validation after each epoch; the best epoch is kept.

WORKDIR gets finetune_config.json and labels.json at start, checkpoints/ (orbax, resumable),
metrics.jsonl + tensorboard/, epochs.json (validation scores per epoch), model/ (the best
epoch, our model dir, written when it is found), and at the end metrics.json (best validation
and test scores) and export/ (a Hugging Face BertForSequenceClassification).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.checkpoints import model_dir, paths
from bert_jax.checkpoints.huggingface import save_hf
from bert_jax.data import batches, classification, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertForSequenceClassification
from bert_jax.training import loop, optim, sharding, steps, xla_options
from bert_jax.training.checkpointer import Checkpointer
from bert_jax.training.finetune_config import FinetuneConfig, optimizer_settings
from bert_jax.training.metric_writer import MetricWriter, parameter_table
from bert_jax.training.scores import classification_scores

log = logging.getLogger("bert_jax")


def finetune(cfg: FinetuneConfig, workdir: str) -> dict:
    """Fine-tune for cfg.epochs; returns metrics.json's content."""
    main = jax.process_index() == 0
    for name in ("batch_size", "eval_batch_size"):
        sharding.check_batch_size(getattr(cfg, name), name=name)
    os.makedirs(workdir, exist_ok=True)
    config, init_params = model_dir.load_pretrained(cfg.init)  # read once, used twice
    vocab_dir = paths.vocab_dir(cfg.init)
    tok = tokenizer.load(vocab_dir)
    tokenizer.check_fits(tok, config.vocab_size, tokenizer.vocab_path(vocab_dir))
    if cfg.max_seq_length > config.max_position_embeddings:
        raise BertJaxError(f"config.max_seq_length: {cfg.max_seq_length} exceeds the model's "
                           f"max_position_embeddings ({config.max_position_embeddings})")
    files = {"train": cfg.train_file, "validation": cfg.validation_file, "test": cfg.test_file}
    splits = classification.load_splits(cfg.dataset, cfg.dataset_config,
                                             files if not cfg.dataset else None)
    names, data = classification.prepare(splits, tok, cfg.text_column, cfg.text_pair_column,
                                              cfg.label_column, cfg.max_seq_length)
    if "validation" not in data:
        raise BertJaxError(f"dataset {cfg.dataset}: has no labelled validation split")
    config = config.replace(id2label=names)
    _check_workdir(workdir, cfg, names, main)
    # logged only now: a refused input or workdir is then the one line on stderr
    log.info("rows: %s", ", ".join(f"{split} {len(d['labels'])}" for split, d in data.items()))

    train = data["train"]
    per_epoch = batches.steps_per_epoch(train, cfg.batch_size)
    total = per_epoch * cfg.epochs
    settings = optimizer_settings(cfg, total)
    mesh = sharding.make_mesh()
    model = BertForSequenceClassification(config, jnp.dtype(cfg.dtype), remat=cfg.remat)
    state = _init_state(model, optim.make_optimizer(settings), cfg, mesh, init_params)
    del init_params
    checkpointer = Checkpointer(workdir, cfg.keep_checkpoints, cfg.checkpoint_every)
    if checkpointer.latest_step() is not None:
        log.info("resuming from %s/%d", checkpointer.directory, checkpointer.latest_step())
        state = checkpointer.restore(checkpointer.latest_step(), state)
    log.info("model %s\n%s", json.dumps(config.to_dict(), sort_keys=True),
             parameter_table(jax.device_get(state.params)))

    replicated, sharded = sharding.replicated(mesh), sharding.data_sharded(mesh)
    schedule = optim.learning_rate_schedule(settings.learning_rate, settings.warmup_steps, total)
    step_fn = jax.jit(steps.make_finetune_step(schedule),
                      in_shardings=(replicated, sharded, replicated),
                      out_shardings=(replicated, replicated), donate_argnums=(0,),
                      compiler_options=xla_options.train_step(cfg.remat, cfg.dtype))
    logits_fn = jax.jit(steps.classification_logits, in_shardings=(replicated, sharded),
                        out_shardings=replicated, compiler_options=xla_options.forward())
    key = sharding.replicated_key(cfg.seed, mesh)
    writer = MetricWriter(workdir, enabled=main)
    history = _read_json(os.path.join(workdir, "epochs.json"), [])
    pc, pi = jax.process_count(), jax.process_index()
    best_params = None
    try:
        with loop.StopRequest() as stop:
            for epoch in range(len(history), cfg.epochs):
                state = loop.run_steps(
                    step_fn, state,
                    lambda s: batches.batch_for_step(train, s, cfg.batch_size, cfg.seed,
                                                     process_index=pi, process_count=pc),
                    until=(epoch + 1) * per_epoch, total=total, key=key, mesh=mesh,
                    writer=writer, checkpointer=checkpointer, stop=stop,
                    log_every=cfg.log_every, desc=f"finetune epoch {epoch + 1}/{cfg.epochs}",
                    postfix=("loss", "accuracy"), on_nonfinite=cfg.on_nonfinite)
                step = int(sharding.fetch(state.step))
                scores = score(logits_fn, state, data["validation"], cfg.eval_batch_size, mesh)
                writer.write(step, "validation", scores)
                log.info("epoch %d validation: %s", epoch + 1, _fmt(scores))
                if all(scores[cfg.best_metric] > h[cfg.best_metric] for h in history):
                    best_params = sharding.fetch(state.params)
                    if main:
                        model_dir.save_model_dir(os.path.join(workdir, paths.BEST_MODEL), config,
                                                  best_params, paths.vocab_files(vocab_dir),
                                                  overwrite=True)
                history.append(dict(scores, epoch=epoch + 1, step=step))
                if main:
                    _write_json(os.path.join(workdir, "epochs.json"), history)
                checkpointer.save(step, state, force=checkpointer.latest_step() != step)
        checkpointer.wait()
        if best_params is None:  # every epoch ran before a resume: the best is on disk
            best_params = model_dir.load_model_dir(os.path.join(workdir, paths.BEST_MODEL))[1]
        result = _final(cfg, workdir, config, names, history, best_params, state, logits_fn,
                        data, mesh, vocab_dir, main)
    finally:
        checkpointer.close()
        writer.close()
    return result


def _final(cfg, workdir, config, names, history, best_params, state, logits_fn, data, mesh,
           vocab_dir, main) -> dict:
    """Test scores of the best epoch, metrics.json, and the Hugging Face export."""
    best = max(history, key=lambda h: h[cfg.best_metric])  # first of equals, as kept above
    result = {"best_epoch": best["epoch"], "best_metric": cfg.best_metric, "labels": list(names),
              "validation": best, "epochs": history}
    if "test" in data:
        best_state = state.replace(params=jax.device_put(best_params, sharding.replicated(mesh)))
        result["test"] = score(logits_fn, best_state, data["test"], cfg.eval_batch_size, mesh)
        log.info("test (epoch %d): %s", best["epoch"], _fmt(result["test"]))
    if main:
        _write_json(os.path.join(workdir, "metrics.json"), result)
        save_hf(os.path.join(workdir, paths.EXPORT), config, best_params,
                        paths.vocab_files(vocab_dir), overwrite=True)
    return result


def score(logits_fn, state, arrays: dict, batch_size: int, mesh) -> dict[str, float]:
    """Loss, accuracy, macro-F1 and MCC over every row of a labelled split."""
    logits = predict_logits(logits_fn, state, arrays, batch_size, mesh)
    labels = arrays["labels"]
    log_probs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    scores = classification_scores(labels, logits.argmax(-1), logits.shape[-1])
    scores["loss"] = float(-np.take_along_axis(log_probs, labels[:, None], 1).mean())
    scores["rows"] = len(labels)
    return scores


def predict_logits(logits_fn, state, arrays: dict, batch_size: int, mesh) -> np.ndarray:
    """(N, C) logits of every row; the padded rows of the last batch are dropped."""
    pc, pi = jax.process_count(), jax.process_index()
    local = batch_size // pc
    inputs = {k: arrays[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    out = []
    for host, n in batches.eval_batches(inputs, batch_size):
        host = {k: v[pi * local:(pi + 1) * local] for k, v in host.items()}
        out.append(sharding.fetch(logits_fn(state, sharding.global_batch(host, mesh)))[:n])
    return np.concatenate(out)


def _init_state(model, tx, cfg, mesh, init_params):
    """A fresh classifier (seeded by cfg.seed) on the encoder (and any heads) of cfg.init."""
    ids = jnp.zeros((1, cfg.max_seq_length), jnp.int32)
    fresh = jax.jit(lambda k: model.init(k, ids)["params"])(jax.random.key(cfg.seed))
    params = model_dir.merge_params(init_params, jax.device_get(fresh), cfg.init)
    params = jax.device_put(params, sharding.replicated(mesh))
    return jax.jit(lambda p: steps.TrainState.create(apply_fn=model.apply, params=p, tx=tx),
                   out_shardings=sharding.replicated(mesh))(params)


def _check_workdir(workdir, cfg, names, main):
    """A workdir holds one task: refuse to resume a run with another label map."""
    path = os.path.join(workdir, "labels.json")
    saved = _read_json(path, None)
    if saved is not None and os.path.isdir(os.path.join(workdir, "checkpoints")) \
            and tuple(saved) != tuple(names):
        raise BertJaxError(f"{workdir}: holds a run with labels {', '.join(saved)}, this data has "
                           f"{', '.join(names)}; use a new --workdir")
    if main:
        _write_json(path, list(names))
        _write_json(os.path.join(workdir, "finetune_config.json"), dataclasses.asdict(cfg))


def _read_json(path, default):
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path, value) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _fmt(scores: dict) -> str:
    return ", ".join(f"{k} {scores[k]:.4f}" for k in ("accuracy", "macro_f1", "mcc", "loss"))
