"""The glue job: the BERT paper's GLUE protocol in one call. Per task, fine-tune at each learning
rate of a grid (and each seed), keep the run best on dev by the task's official score, predict
the test sets with it in the GLUE server's files, and write the table.

Each (task, rate, seed) is its own fine-tuning workdir, WORKDIR/runs/<task>/lr<rate>-seed<seed>
(training/finetune.py, which resumes from its checkpoints); a run is finished when its official
dev scores are written beside it (glue_scores.json), then its checkpoints are removed (its best
epoch stays in model/). Rerunning the job skips finished runs and resumes a killed one, so the
table comes out the same. WORKDIR gets results.json, results.md and submission/.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from typing import Callable

from bert_jax.model_files import atomic, model_dir, paths
from bert_jax.errors import BertJaxError
from bert_jax.glue import benchmark, markdown_table, scores, submission, workdir_data
from bert_jax.glue.benchmark import HUB, GlueTask
from bert_jax.training import config_files, model_card
from bert_jax.training.finetune_config import FinetuneConfig

log = logging.getLogger("bert_jax")


@dataclasses.dataclass(frozen=True)
class GlueSettings:
    """One GLUE protocol run; the paper's recipe by default (batch 32, 3 epochs, the grid)."""

    init_from: str  # the model to fine-tune: our model dir, a pretraining workdir or an HF dir
    data_dir: str = ""  # a folder in the GLUE download's layout ("" = the hub)
    hub: str = HUB  # the hub dataset in nyu-mll/glue's layout, when data_dir is ""
    tasks: str = ""  # comma-separated task names ("" = all nine)
    learning_rates: tuple = (5e-5, 4e-5, 3e-5, 2e-5)
    seeds: tuple = (0,)
    epochs: int = 3
    batch_size: int = 32
    max_seq_length: int = 128
    eval_batch_size: int = 64
    max_train_examples: int = 0  # 0 = every training row


# the settings a rerun in the same workdir must share: its finished runs were trained with them
SHARED = ("init_from", "epochs", "batch_size", "max_seq_length")
RENAMED = {"init": "init_from"}  # old name → new in a saved glue_settings.json


def glue(settings: GlueSettings, workdir: str, say: Callable[[str], None] = print) -> dict:
    """Run (or finish) the protocol; returns results.json's content. `say` gets one line per
    run."""
    chosen = benchmark.select(settings.tasks)
    _check_settings(settings)
    os.makedirs(workdir, exist_ok=True)
    _check_workdir(settings, workdir)
    plan = [(task, lr, seed) for task in chosen for lr in settings.learning_rates
            for seed in settings.seeds]
    data = {task.name: workdir_data.prepare(task, settings.data_dir, settings.hub,
                                         settings.max_train_examples, workdir)
            for task in chosen}
    records = {task.name: [] for task in chosen}
    for number, (task, lr, seed) in enumerate(plan, 1):
        record = _run(settings, task, lr, seed, data[task.name], workdir,
                      f"[{number}/{len(plan)}]", say)
        records[task.name].append(record)
    results = {"settings": dataclasses.asdict(settings), "tasks": {}}
    for task in chosen:
        best = max(records[task.name], key=lambda r: r["score"])  # first of equals
        files = _submit(settings, task, best, data[task.name], workdir)
        results["tasks"][task.name] = {"metrics": list(task.metrics), "best": best,
                                       "runs": records[task.name], "submission": files}
    results["average"] = scores.glue_average(
        list(chosen), [results["tasks"][t.name]["best"]["scores"] for t in chosen])
    json_name, md_name = paths.GLUE_RESULTS
    atomic.write_json(os.path.join(workdir, json_name), results)
    with atomic.atomic_file(os.path.join(workdir, md_name)) as tmp, \
            open(tmp, "w", encoding="utf-8") as f:
        f.write(markdown_table.markdown(list(chosen), results))
    return results


def _check_settings(s: GlueSettings) -> None:
    if not s.init_from:
        raise BertJaxError("init_from: a pretrained model to fine-tune is required")
    if not s.learning_rates or any(not lr > 0 for lr in s.learning_rates):
        raise BertJaxError(f"learning_rates: expected positive rates, got {list(s.learning_rates)}")
    if not s.seeds or any(seed < 0 for seed in s.seeds):
        raise BertJaxError(f"seeds: expected seeds ≥ 0, got {list(s.seeds)}")
    if s.max_train_examples < 0:
        raise BertJaxError(f"max_train_examples: expected ≥ 0 (0 = all), got "
                           f"{s.max_train_examples}")


def _check_workdir(s: GlueSettings, workdir: str) -> None:
    """A rerun must share SHARED with the runs already in the workdir; then they are saved."""
    path = os.path.join(workdir, paths.GLUE_SETTINGS)
    mine = {k: getattr(s, k) for k in SHARED}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = config_files.migrate(json.load(f), RENAMED)  # saved before a rename
        changed = [k for k in SHARED if saved.get(k) != mine[k]]
        if changed:
            raise BertJaxError(f"{workdir}: holds GLUE runs with " + ", ".join(
                f"{k} {saved.get(k)}" for k in changed) + "; this is " + ", ".join(
                f"{k} {mine[k]}" for k in changed) + "; use a new workdir")
    atomic.write_json(path, mine)


def run_dir(workdir: str, task: GlueTask, lr: float, seed: int) -> str:
    return os.path.join(workdir, paths.GLUE_RUNS, task.name, f"lr{lr:g}-seed{seed}")


def finetune_config(s: GlueSettings, task: GlueTask, lr: float, seed: int, data: dict
                    ) -> FinetuneConfig:
    """The fine-tuning run of (task, lr, seed): sequence classification (regression for STS-B)
    on the prepared jsonl files, the kept epoch picked by the task's first official score
    that the job scores (MRPC and QQP: accuracy)."""
    best = {"mcc": "mcc", "pearson": "pearson"}.get(task.metrics[0], "accuracy")
    return FinetuneConfig(
        task="regression" if task.regression else "sequence-classification",
        init_from=s.init_from,
        train_file=data["train"], validation_file=data["validation"],
        text_column="sentence1", text_pair_column="sentence2" if task.pair else "",
        label_column="label", max_seq_length=s.max_seq_length, epochs=s.epochs,
        batch_size=s.batch_size, eval_batch_size=s.eval_batch_size, learning_rate=lr, seed=seed,
        best_metric=best)


def _run(s: GlueSettings, task: GlueTask, lr: float, seed: int, data: dict, workdir: str,
         number: str, say) -> dict:
    """One run's record (official dev scores), from glue_scores.json when it finished before."""
    from bert_jax.training.finetune import finetune
    directory = run_dir(workdir, task, lr, seed)
    done = os.path.join(directory, paths.GLUE_RUN_SCORES)
    name = f"{number} {task.name} lr {lr:g} seed {seed}"
    if os.path.isfile(done):
        with open(done, encoding="utf-8") as f:
            record = json.load(f)
        say(f"{name}: {markdown_table.scores_line(task, record['scores'])} (finished before)")
        return record
    started = time.time()
    result = finetune(finetune_config(s, task, lr, seed, data), directory)
    by_split = {split: _dev_scores(task, directory, data[split], s)
                for split in task.scored_splits()}
    found = scores.task_scores(task, by_split)
    record = {"task": task.name, "learning_rate": lr, "seed": seed, "scores": found,
              "score": scores.task_score(task, found), "best_epoch": result.metrics["best_epoch"],
              "steps": result.steps, "run": os.path.relpath(directory, workdir)}
    # the export's card, with the official dev scores and the Hub dataset the files came from
    model_card.write_finetune_card(
        os.path.join(directory, paths.EXPORT), finetune_config(s, task, lr, seed, data),
        directory, {"validation": found, "best_epoch": record["best_epoch"]},
        "BertForSequenceClassification", tuple(found),
        dataset=(s.hub if not s.data_dir else "", task.name))
    atomic.write_json(done, record)
    shutil.rmtree(os.path.join(directory, paths.CHECKPOINTS), ignore_errors=True)
    say(f"{name}: {markdown_table.scores_line(task, found)} ({_minutes(time.time() - started)})")
    return record


def _predict(task: GlueTask, directory: str, rows: list, s: GlueSettings) -> list:
    """The kept model's predictions for rows, as the server writes them (label values; floats
    for STS-B)."""
    from bert_jax.data import tokenizer
    from bert_jax.tasks import classification, regression
    model = os.path.join(directory, paths.BEST_MODEL)
    config, params = model_dir.load_pretrained(model)
    tok = tokenizer.load(model)
    texts = [r["sentence1"] for r in rows]
    pairs = [r["sentence2"] for r in rows] if task.pair else None
    if task.regression:
        values = regression.predict_values(config, params, tok, texts, pairs, s.max_seq_length,
                                           s.eval_batch_size)
        return [float(v) for v in values]
    probabilities = classification.predict_proba(config, params, tok, texts, pairs,
                                                 s.max_seq_length, s.eval_batch_size)
    return [config.id2label[i] for i in probabilities.argmax(-1)]


def _dev_scores(task: GlueTask, directory: str, path: str, s: GlueSettings) -> dict:
    rows = workdir_data.read_rows(path)
    return scores.split_scores(task, _predict(task, directory, rows, s),
                               [r["label"] for r in rows])


def _submit(s: GlueSettings, task: GlueTask, best: dict, data: dict, workdir: str) -> list:
    """The best run's test predictions in the server's files; a file already written from the
    run that is still best is kept (runs/submitted.json says which run wrote each)."""
    folder = os.path.join(workdir, paths.SUBMISSION)
    stamps_path = os.path.join(workdir, paths.GLUE_RUNS, paths.GLUE_SUBMITTED)
    stamps = workdir_data.read_json(stamps_path, {})
    written = []
    for split, name in task.submissions.items():
        if split not in data:
            continue
        path = os.path.join(folder, name)
        if not (os.path.isfile(path) and stamps.get(name) == best["run"]):
            rows = workdir_data.read_rows(data[split])
            predictions = _predict(task, os.path.join(workdir, best["run"]), rows, s)
            submission.write(path, [r["index"] for r in rows], predictions)
            stamps[name] = best["run"]
            atomic.write_json(stamps_path, stamps)
        written.append(os.path.relpath(path, workdir))
    return written


def _minutes(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
