"""The model card (README.md) every export carries: the Hub's metadata header, with the run's
scores in `model-index`, and a short body saying how the model was trained, on what machine,
and how to load it. Written with huggingface_hub's own card classes, so the Hub (and
`huggingface_hub.ModelCard.load`) reads it as it reads any card.
"""

from __future__ import annotations

import os

from bert_jax import resources
from bert_jax.model_files import atomic, hub
from bert_jax.data import hub_datasets
from bert_jax.runtime import environment, metric_writer

FILE = "README.md"
TAGS = ["bert_jax", "jax", "flax", "bert"]
# the Hub's pipeline tag of each fine-tuning task (multiple choice has none)
PIPELINES = {"sequence-classification": "text-classification",
             "regression": "text-classification", "question-answering": "question-answering",
             "token-classification": "token-classification"}
# what a reader needs of a pretraining config to know what was trained
PRETRAIN_FIELDS = ("model", "objective", "max_seq_length", "batch_size", "learning_rate",
                   "warmup_steps", "optimizer", "time_budget_minutes", "dtype", "seed")
FINETUNE_FIELDS = ("task", "max_seq_length", "epochs", "batch_size", "learning_rate", "seed",
                   "best_metric")


def write_pretrain_card(export: str, cfg, workdir: str, step: int) -> str:
    """README.md in a pretraining export: the final held-out MLM accuracy and perplexity (the
    last evaluation in metrics.jsonl). Returns its path."""
    rows = metric_writer.read_metrics(workdir)
    final = next((r for r in reversed(rows) if r["split"] == "eval"), {})
    name = os.path.basename(os.path.abspath(workdir))
    data = cfg.train_dataset or resources.portable(cfg.train_files)
    metrics = [("accuracy", "held-out MLM accuracy", final.get("mlm_accuracy")),
               ("perplexity", "held-out MLM perplexity", final.get("mlm_perplexity")),
               ("accuracy", "held-out NSP accuracy", final.get("nsp_accuracy"))]
    results = _results("fill-mask", "pretraining held-out split", data, "held-out", metrics)
    datasets = [d for d in [_hub_dataset(cfg.train_dataset)] if d]
    trained = (f"Pretrained by bert_jax (`bert-jax pretrain`) for {step:,} steps on `{data}` "
               f"({cfg.eval_fraction:.1%} held out by document), {_minutes(rows)}.")
    return _write(export, name, "fill-mask", datasets, _hub_model(cfg.init_from), results,
                  trained, _fields(cfg, PRETRAIN_FIELDS), "BertForPreTraining", ["pretraining"])


def write_finetune_card(export: str, cfg, workdir: str, result: dict, architecture: str,
                        names: tuple, dataset: tuple = ()) -> str:
    """README.md in a fine-tuning export: the scores `names` of the best epoch's validation
    and of the test (metrics.json's). `dataset` (hub id, configuration) names the data where
    the config's files are a copy of a hub dataset (GLUE). Returns its path."""
    hub, configuration = dataset or (cfg.dataset, cfg.dataset_config)
    data = hub or resources.portable(cfg.train_file)
    pipeline = PIPELINES.get(cfg.task)
    results = []
    for split in ("validation", "test"):
        scores = result.get(split) or {}
        results += _results(pipeline or cfg.task, hub or "local files", data, split,
                            [(k, k, scores[k]) for k in names if k in scores],
                            configuration)
    epochs = (f", the kept epoch {result['best_epoch']} (best validation "
              f"{result.get('best_metric', cfg.best_metric)})" if "best_epoch" in result else "")
    rows = metric_writer.read_metrics(workdir)
    steps = max((r["step"] for r in rows), default=0)
    trained = (f"Fine-tuned by bert_jax (`bert-jax finetune`) from `{cfg.init_from}` for the "
               f"{cfg.task} task on `{data}`{f' ({configuration})' if configuration else ''}"
               f"{epochs}: {steps:,} steps, {_minutes(rows)}.")
    return _write(export, os.path.basename(os.path.abspath(workdir)), pipeline,
                  [d for d in [_hub_dataset(hub)] if d], _hub_model(cfg.init_from), results,
                  trained, _fields(cfg, FINETUNE_FIELDS), architecture, [cfg.task])


def _minutes(rows: list) -> str:
    """The run's wall clock as its metrics.jsonl shows it (resumes included)."""
    minutes = (rows[-1]["time"] - rows[0]["time"]) / 60 if len(rows) > 1 else 0.0
    return f"about {minutes:.1f} minutes from the first logged step to the last evaluation"


def _results(task_type, dataset_type, dataset_name, split, metrics, configuration=None):
    from huggingface_hub import EvalResult
    return [EvalResult(task_type=task_type, dataset_type=dataset_type, dataset_name=dataset_name,
                       dataset_split=split, dataset_config=configuration or None,
                       metric_type=kind, metric_name=label, metric_value=float(value))
            for kind, label, value in metrics if isinstance(value, (int, float))]


def _hub_model(name: str):
    """The Hub id (revision dropped) a model started from, for `base_model`, which the Hub
    reads as an id; None for a local path."""
    found = hub.split_id(name)
    return found[0] if found and not os.path.exists(name) else None


def _hub_dataset(name: str):
    """The Hub dataset id (revision dropped) of a `datasets` name; None for a local one."""
    base, _ = hub_datasets.split_revision(name or "")
    return base if base and not os.path.exists(base) else None


def _fields(cfg, names) -> str:
    return ", ".join(f"{n}={getattr(cfg, n)!r}" for n in names if hasattr(cfg, n))


def _write(export, name, pipeline, datasets, base, results, trained, fields, architecture,
           tags) -> str:
    from huggingface_hub import ModelCard, ModelCardData
    data = ModelCardData(library_name="transformers", tags=TAGS + tags, pipeline_tag=pipeline,
                         base_model=base, datasets=datasets or None, model_name=name,
                         eval_results=results or None)
    env = environment.record()
    machine = (f"{env['cpu']['model'] or env['platform']['machine']}, {env['cpu']['cores']} "
               f"cores, jax {env['versions']['jax']} on {env['jax']['backend']} "
               f"({len(env['jax']['devices'])} device(s))")
    scores = "\n".join(f"| {r.dataset_split} | {r.metric_name} | {r.metric_value:.4f} |"
                       for r in results)
    body = f"""
# {name}

{trained}

- Settings: {fields}
- Machine: {machine}; bert_jax {resources.VERSION}

## Scores

| split | metric | value |
|---|---|---|
{scores}

## Use

In transformers:

```python
from transformers import AutoTokenizer, {architecture}
model = {architecture}.from_pretrained("PATH_OR_HUB_ID")
tokenizer = AutoTokenizer.from_pretrained("PATH_OR_HUB_ID")
```

In bert_jax:

```python
from bert_jax import load_pretrained
config, params = load_pretrained("PATH_OR_HUB_ID")
```
"""
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")
    path = os.path.join(export, FILE)
    with atomic.atomic_file(path) as tmp:
        card.save(tmp)
    return path

