"""The fine-tuning job, the runner: a pretrained encoder + a fresh task head (bert_jax/tasks;
the parts built by training/finetune_parts.py), trained epoch by epoch with the shared
skeleton, scored on validation after each epoch; the best epoch is kept.

WORKDIR gets finetune_config.json and labels.json at start, checkpoints/ (orbax, resumable),
metrics.jsonl + tensorboard/, epochs.json (validation scores per epoch), model/ (the best
epoch, our model dir, written when it is found; question answering adds predictions.json, the
best epoch's validation answers by id), and at the end metrics.json (best validation and test
scores, the task's headline scores also at its top level) and export/ (the task's Hugging Face
class: BertForSequenceClassification, …QuestionAnswering, …TokenClassification,
…MultipleChoice).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os

import jax
import numpy as np

from bert_jax.model_files import atomic, model_dir, paths
from bert_jax.model_files.huggingface import save_hf
from bert_jax.data.prepared_set import vocab_hash
from bert_jax.errors import BertJaxError
from bert_jax.runtime import multihost, sharding
from bert_jax.runtime.metric_writer import parameter_table
from bert_jax.tasks import DEFAULT
from bert_jax.tasks.task import EvalSplit
from bert_jax.training import (finetune_config, finetune_parts, loop, model_card, run,
                               run_record)
from bert_jax.training.finetune_config import FinetuneConfig

log = logging.getLogger("bert_jax")


def finetune(cfg: FinetuneConfig, workdir: str, on_start=None) -> run.JobResult:
    """Fine-tune for cfg.epochs; the result's metrics are metrics.json's content. `on_start()` is
    called once the inputs are checked and training begins."""
    cfg = finetune_config.validate(cfg)  # also when called from Python, not the CLI
    main = jax.process_index() == 0
    for name in ("batch_size", "eval_batch_size"):
        sharding.check_batch_size(getattr(cfg, name), name=name)
    if main:  # process 0 writes the workdir; the others' (maybe their own disks) stay empty
        os.makedirs(workdir, exist_ok=True)
    parts = finetune_parts.build(cfg)
    task, task_data, config = parts.task, parts.task_data, parts.config
    best_metric, names = parts.best_metric, task_data.names
    items = launch_items(cfg, config, parts.tok, task_data.train)
    multihost.check_same_launch(items)
    _check_workdir(workdir, cfg, names, main, run_record.inputs_of(items))
    # logged only now: a refused input or workdir is then the one line on stderr
    log.info("%s rows: %s", cfg.task, ", ".join(
        [f"train {len(task_data.train['input_ids'])}"]
        + [f"{split} {e.size}" for split, e in task_data.evals.items()]))

    with run.run_context(workdir, cfg.seed, cfg.keep_checkpoints, cfg.checkpoint_every,
                         cfg.checkpoint_dir, on_start) as ctx:
        state = run.init_state(ctx, parts.model, parts.tx, max_seq_length=cfg.max_seq_length,
                               seed=cfg.seed, pretrained=parts.take_pretrained(),
                               source=cfg.init_from, input_shape=parts.input_shape,
                               start=parts.start)
        state = run.restore_latest(ctx, state)
        log.info("model %s\n%s", json.dumps(config.to_dict(), sort_keys=True),
                 parameter_table(sharding.fetch(state.params)))
        step_fn, logits_fn = parts.train_step, parts.logits_step
        history = _read_json(os.path.join(workdir, paths.EPOCHS), [])
        pc, pi = jax.process_count(), jax.process_index()
        best_params = None
        per_epoch, total = parts.per_epoch, parts.total

        for epoch in range(len(history), cfg.epochs):
            state = loop.run_steps(
                ctx, step_fn, state, lambda s: parts.train_batch(s, pi, pc),
                until=(epoch + 1) * per_epoch, total=total, log_every=cfg.log_every,
                desc=f"finetune epoch {epoch + 1}/{cfg.epochs}", postfix=("loss", "accuracy"),
                on_nonfinite=cfg.on_nonfinite)
            step = int(sharding.fetch(state.step))
            scores, predictions = score(ctx, logits_fn, state, task_data.evals["validation"],
                                        cfg.eval_batch_size)
            ctx.writer.write(step, "validation", scores)
            log.info("epoch %d validation: %s", epoch + 1, _fmt(scores, task.headline))
            if all(scores[best_metric] > h[best_metric] for h in history):
                best_params = sharding.fetch(state.params)
                if main:
                    model_dir.save_model_dir(os.path.join(workdir, paths.BEST_MODEL), config,
                                             best_params, paths.vocab_files(cfg.init_from),
                                             overwrite=True, architecture=task.architecture)
                    if predictions is not None:
                        atomic.write_json(os.path.join(workdir, task.predictions_file),
                                          predictions)
            history.append(dict(scores, epoch=epoch + 1, step=step))
            if main:
                atomic.write_json(os.path.join(workdir, paths.EPOCHS), history)
            ctx.checkpointer.save(step, state, force=ctx.checkpointer.latest_step() != step)
        ctx.checkpointer.wait()
        if best_params is None:  # every epoch ran before a resume: the best is on disk
            best_params = model_dir.load_model_dir(os.path.join(workdir, paths.BEST_MODEL))[1]
        return _final(ctx, cfg, task, best_metric, config, names, history, best_params, state,
                      logits_fn, task_data.evals)


def launch_items(cfg: FinetuneConfig, config, tok, train: dict) -> dict[str, str]:
    """multihost.launch_items of a fine-tuning run (the model config holds its labels): its
    data is the tokenised training rows."""
    rows = hashlib.blake2b(digest_size=6)
    for name in sorted(train):
        values = np.asarray(train[name])
        if values.dtype.kind in "biuf":  # numbers (object arrays would hash their pointers)
            rows.update(name.encode() + np.ascontiguousarray(values).tobytes())
    return multihost.launch_items(cfg, config, vocab_hash(tok), {
        "the training data": f"{len(train['input_ids']):,} rows ({rows.hexdigest()})"})


def _final(ctx, cfg, task, best_metric, config, names, history, best_params, state, logits_fn,
           evals) -> run.JobResult:
    """Test scores of the best epoch, metrics.json, and the Hugging Face export."""
    best = max(history, key=lambda h: h[best_metric])  # first of equals, as kept above
    result = {"task": cfg.task, **{k: best[k] for k in task.headline if k in best},
              "best_epoch": best["epoch"], "best_metric": best_metric, "labels": list(names),
              "validation": best, "epochs": history}
    if "test" in evals:
        params = jax.device_put(best_params, sharding.replicated(ctx.mesh))
        result["test"], _ = score(ctx, logits_fn, state.replace(params=params), evals["test"],
                                  cfg.eval_batch_size)
        log.info("test (epoch %d): %s", best["epoch"], _fmt(result["test"], task.headline))
    if ctx.is_main:
        atomic.write_json(os.path.join(ctx.workdir, paths.RESULT), result)
        save_hf(os.path.join(ctx.workdir, paths.EXPORT), config, best_params,
                paths.vocab_files(cfg.init_from), overwrite=True, architecture=task.architecture)
        model_card.write_finetune_card(os.path.join(ctx.workdir, paths.EXPORT), cfg,
                                       ctx.workdir, result, task.architecture,
                                       tuple(dict.fromkeys(task.headline + task.metrics)))
    return run.JobResult(ctx.workdir, int(sharding.fetch(state.step)), result,
                         os.path.join(ctx.workdir, paths.BEST_MODEL),
                         os.path.join(ctx.workdir, paths.EXPORT), ctx.checkpointer.directory)


def score(ctx, logits_fn, state, split: EvalSplit, batch_size: int) -> tuple[dict, object]:
    """(scores, predictions) of the task over every row of a labelled split (a chunk of rows at
    a time where the split streams them)."""
    def logits_of(inputs: dict):
        outputs, rows = run.eval_outputs(ctx, logits_fn, state, inputs, batch_size)
        trimmed = [jax.tree.map(lambda x, n=n: np.asarray(x)[:n], out)  # padding dropped
                   for out, n in zip(outputs, rows)]
        return jax.tree.map(lambda *parts: np.concatenate(parts), *trimmed)

    if split.stream is not None:
        return split.stream(logits_of)
    return split.score(logits_of(split.inputs))


def _check_workdir(workdir, cfg, names, main, inputs):
    """A workdir holds one run: refuse to resume a run of another task, label map or settings
    that change what it computes (training/run_record.py); then process 0 saves its record."""
    path = os.path.join(workdir, paths.LABELS)
    saved = _read_json(path, None)
    checkpoints = paths.checkpoint_dir(workdir, cfg.checkpoint_dir)
    resuming = os.path.isdir(checkpoints)
    saved_task = _read_json(os.path.join(workdir, paths.FINETUNE_CONFIG), {}).get(
        "task", DEFAULT)
    if resuming and saved is not None and saved_task != cfg.task:
        raise BertJaxError(f"{workdir}: holds a {saved_task} run, this is {cfg.task}; use a new "
                           f"workdir")
    if resuming and saved is not None and tuple(saved) != tuple(names):
        raise BertJaxError(f"{workdir}: holds a run with labels {', '.join(saved)}, this data has "
                           f"{', '.join(names)}; use a new workdir")
    record_path = os.path.join(workdir, paths.FINETUNE_CONFIG)
    record = run_record.check_resume(workdir, record_path, cfg, inputs,
                                     finetune_config.RESUMABLE, checkpoints)
    if main:
        atomic.write_json(path, list(names))
        run_record.save(record_path, record)


def _read_json(path, default):
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _fmt(scores: dict, headline) -> str:
    return ", ".join(f"{k} {scores[k]:.4f}" for k in (*headline, "loss") if k in scores)
