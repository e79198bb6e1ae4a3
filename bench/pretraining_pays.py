"""Does pretraining pay? A pretraining run's export against random weights of the same shape and
vocabulary, fine-tuned alike, measured as papers measure it: label efficiency and a word-order
task, each arm at its best rate on a dev split, over paired seeds.

    python bench/pretraining_pays.py --recipe default=runs/default [--recipe long=runs/long]
        [--tasks fine_foods:250,fine_foods:1000,fine_foods:3000,pos:500] [--seeds 0,1,2,3,4]
        [--rates 1e-4,3e-4,1e-3] [--epochs 20] [--arms pretrained,random]
        [--results bench/pays] [--work runs/pays] [--data runs/task_data] [--config.F=V ...]
    python bench/pretraining_pays.py --summary [--results bench/pays]

Tasks (data made once under --work, from the bundled reviews and bench/task_data.py):
  fine_foods:N  the bundled reviews' training file split once (seed 0): 1,000 reviews are the
                dev split, N of the other 3,000 the labelled training set (nested: the 250 are
                among the 1,000, those among the 3,000); the test file is data/fine_foods/
                test.csv. Headline: MCC.
  pos:N         part-of-speech tags of CoNLL-2003 (column 1 of its files; a word-order task):
                N training sentences (bench/task_data.py's seeded subset), dev 1,000 sentences
                of valid.txt, test test.txt. Headline: word accuracy.
Arms:
  pretrained    the recipe's export (WORKDIR/export)
  random        BERT's init at the export's shape and vocabulary as transformers builds it:
                torch.manual_seed(seed); BertForPreTraining(config).save_pretrained — the
                baseline a user compares with
  random_start  random weights started as the recipe starts them (its position init and
                scale, mimetic attention): what the recipe's starting point alone does
  redrawn       the export with the parameters --redraw matches redrawn at the model's init
A seed sets the fine-tuning seed (head init, dropout, batch order) of every arm, so the same
seed is the same head and batch order on both sides, and the random arm's draw. Every arm
trains --epochs epochs and keeps its best epoch on dev (the job's own best-epoch rule); the
test file is scored once, with that epoch. Each run writes RESULTS/RECIPE/TASK-N/ARM/
lr{rate}-seed{seed}.json (recipe, export and its sha256, task, labels, arm, seed, rate, options,
dev and test scores), so the protocol stops and resumes (a run whose file exists is skipped, a
killed run resumes from its checkpoint) and every table is recomputed from the files. A
pretraining workdir rebuilt later (a step-based run repeats bit for bit) adds to a recipe's
results only if its export has the same sha256 as theirs. The random arm reads only the export's
shape and vocabulary: a random run whose model (sha256), task, labels, rate, seed, epochs and
options match one already on file, of any recipe, is that run, and its record is shared
(naming its source: random_from) — exports pretrained with other seeds share one random arm,
and it repeats digit for digit within a session. `--config.F=V`
options (e.g. reinit_layers=1) apply to every arm alike and are recorded; a results folder
holds one set of options (name the recipe differently to compare others, e.g. default+reinit).

The summary (RESULTS/pays.md, pays.json, pays.png): per recipe × task × labels × arm, the rate
with the best mean dev score over the seeds every rate has (never the test file), its test
mean ± sd, and pretrained − random paired by seed with the paired t-test's p
(bench/compare_seeds.py's statistics); beside each, a baseline without BERT: TF-IDF (1–2-grams)
+ logistic regression (scikit-learn, C picked on dev) for fine_foods, the most frequent tag of
each word for POS. Below the recipes, each arm at its best options and rate, both picked on
dev among the recipes fine-tuned from one pretraining workdir (best_options): an option that
slows one arm more than the other cannot decide the comparison alone. Last, the recipes that
differ only in their pretraining seed (named ROOT-sN+OPTIONS: ROOT+OPTIONS pretrained with
--config.seed=N) side by side and pooled (pretraining_seeds): one export is one draw, so the
table gives the exports' spread and how many exports a +3 / +5 point claim needs.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import time

import compare_seeds  # welch: the paired t-test (bench/ is on sys.path: bench_common.py)
import task_data  # fetch_conll, conll_sentences, conll_subset
from bench_common import files_sha256

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINE_FOODS = os.path.join(ROOT, "data", "fine_foods")
DEV_REVIEWS = 1000
DEV_SENTENCES = 1000
SPLIT_SEED = 0  # the data split, fixed: fine-tuning seeds vary, the splits do not
ARMS = ("pretrained", "random", "random_start", "redrawn")
HEADLINE = {"fine_foods": "mcc", "pos": "accuracy"}


# -- data ----------------------------------------------------------------------------------------

def fine_foods_split(out: str, labels: int) -> dict:
    """{train, validation, test} files: dev = 1,000 reviews of the training file, train = the
    first `labels` of the other 3,000 in a fixed shuffled order (so smaller sets nest)."""
    with open(os.path.join(FINE_FOODS, "train.csv"), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    order = list(range(len(rows)))
    random.Random(SPLIT_SEED).shuffle(order)
    dev, pool = order[:DEV_REVIEWS], order[DEV_REVIEWS:]
    if not 0 < labels <= len(pool):
        raise SystemExit(f"fine_foods:{labels}: expected 1 to {len(pool)} labelled reviews")
    os.makedirs(out, exist_ok=True)
    files = {"train": os.path.join(out, f"train_{labels}.csv"),
             "validation": os.path.join(out, "dev.csv")}
    for path, keep in ((files["train"], pool[:labels]), (files["validation"], dev)):
        _write_csv(path, [rows[i] for i in keep])
    return {**files, "test": os.path.join(FINE_FOODS, "test.csv")}


def _write_csv(path: str, rows: list[dict]) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=["text", "label"])
    writer.writeheader()
    writer.writerows({"text": r["text"], "label": r["label"]} for r in rows)
    task_data.write_if_changed(path, text.getvalue())


def pos_split(data: str, labels: int) -> dict:
    """{train, validation, test} CoNLL-2003 files (bench/task_data.py fetches them). A tag the
    training sentences never show cannot be predicted, and the job refuses it: dev and test
    keep the sentences whose tags all occur in training (the count dropped is printed; the
    rare tags are such as WP$, UH, LS)."""
    out = os.path.join(data, "conll2003")
    task_data.fetch_conll(os.path.join(data, "downloads"), out)
    train = task_data.conll_subset(out, labels, SPLIT_SEED)
    seen = {line.split()[1] for s in task_data.conll_sentences(train) for line in s}
    sentences = task_data.conll_sentences(os.path.join(out, "valid.txt"))
    keep = sorted(random.Random(SPLIT_SEED).sample(range(len(sentences)), DEV_SENTENCES))
    files = {"train": train}
    for split, name, rows in (("validation", f"valid_{DEV_SENTENCES}_pos{labels}.txt",
                               [sentences[i] for i in keep]),
                              ("test", f"test_pos{labels}.txt", task_data.conll_sentences(
                                  os.path.join(out, "test.txt")))):
        known = [s for s in rows if all(line.split()[1] in seen for line in s)]
        if len(known) < len(rows):
            print(f"pos:{labels} {split}: {len(rows) - len(known)} of {len(rows)} sentences "
                  f"dropped (a tag the {labels} training sentences lack)", flush=True)
        files[split] = os.path.join(out, name)
        task_data.write_if_changed(files[split], "".join("\n".join(s) + "\n\n" for s in known))
    return files


def task_files(task: str, labels: int, work: str, data: str) -> dict:
    if task == "fine_foods":
        return fine_foods_split(os.path.join(work, "data", "fine_foods"), labels)
    return pos_split(data, labels)


def task_overrides(task: str, files: dict) -> list[str]:
    """The fine-tuning config of a task, less rate, seed, epochs and the user's options."""
    common = [f"train_file={files['train']}", f"validation_file={files['validation']}",
              f"test_file={files['test']}", "checkpoint_every=100000", "log_every=1000"]
    if task == "fine_foods":
        return ["task=sequence-classification", "text_column=text", "label_column=label",
                "best_metric=mcc", *common]
    return ["task=token-classification", "conll_column=1", "best_metric=accuracy", *common]


# -- arms ----------------------------------------------------------------------------------------

def random_model(export: str, seed: int, out: str) -> str:
    """BERT's init at the export's shape and vocabulary, as transformers builds it."""
    import torch
    import transformers

    from bert_jax.model_files import paths
    if os.path.isfile(os.path.join(out, "config.json")):
        return out
    config = transformers.BertConfig.from_json_file(os.path.join(export, "config.json"))
    torch.manual_seed(seed)
    model = transformers.BertForPreTraining(config)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for f in paths.vocab_files(export):
        shutil.copy(f, tmp)
    os.replace(tmp, out)
    return out


def random_start_model(export: str, pretrained: str, seed: int, out: str) -> str:
    """Our init started as the pretraining run started its weights (train_config.json)."""
    import jax
    import numpy as np

    from bert_jax.model_files import paths
    from bert_jax.model_files.huggingface import save_hf
    from bert_jax.models import BertConfig, BertForPreTraining
    from bert_jax.training import run_record
    from bert_jax.training.initial_params import starting_params
    from bert_jax.training.pretrain_config import PretrainConfig
    config = BertConfig.from_json_file(os.path.join(export, "config.json"))
    params = BertForPreTraining(config).init(jax.random.key(seed), np.ones((1, 8), np.int32))[
        "params"]
    saved = run_record.read(os.path.join(pretrained, paths.TRAIN_CONFIG))
    fields = {f.name for f in dataclasses.fields(PretrainConfig)}  # not inputs / resumes
    params = starting_params(params, config,
                             PretrainConfig(**{k: v for k, v in saved.items() if k in fields}))
    save_hf(out, config, params, paths.vocab_files(export), overwrite=True)
    return out


def redrawn_model(export: str, pattern: str, seed: int, out: str) -> str:
    """The export with the parameters whose path ("bert/encoder/layer_1/attention/query/
    kernel"-style) matches `pattern` redrawn as the model's own init draws them."""
    import re

    import jax
    import numpy as np
    from flax import traverse_util

    from bert_jax.model_files import paths
    from bert_jax.model_files.huggingface import load_hf, save_hf
    from bert_jax.models import BertForPreTraining
    config, params = load_hf(export)
    fresh = BertForPreTraining(config).init(jax.random.key(seed), np.ones((1, 8), np.int32))[
        "params"]
    flat, new = (traverse_util.flatten_dict(p, sep="/") for p in (params, fresh))
    hits = sorted(k for k in flat if re.search(pattern, k))
    if not hits:
        raise SystemExit(f"--redraw {pattern!r}: matches no parameter of {export}")
    flat.update({k: new[k] for k in hits})
    save_hf(out, config, traverse_util.unflatten_dict(flat, sep="/"), paths.vocab_files(export),
            overwrite=True)
    return out


def arm_model(arm: str, pretrained: str, seed: int, models: str, redraw: str) -> str:
    export = os.path.join(pretrained, "export")
    where = os.path.join(models, f"{arm}-{seed}")
    if arm == "pretrained":
        return export
    if arm == "random":
        return random_model(export, seed, where)
    if arm == "random_start":
        return random_start_model(export, pretrained, seed, where)
    return redrawn_model(export, redraw, seed, where)


# -- runs ----------------------------------------------------------------------------------------

def result_path(results: str, recipe: str, task: str, labels: int, arm: str, rate: float,
                seed: int) -> str:
    return os.path.join(results, recipe, f"{task}-{labels}", arm, f"lr{rate:g}-seed{seed}.json")


SCORES = ("dev", "best_epoch", "test", "dev_by_epoch", "wall_s")  # what finetune_once returns


def finetune_once(init: str, overrides: list[str], workdir: str) -> dict:
    """The best dev epoch's scores and the test scores of one fine-tuning run."""
    from bert_jax.training.config_files import apply_overrides
    from bert_jax.training.finetune import finetune
    from bert_jax.training.finetune_config import FinetuneConfig
    from bert_jax.runtime import workdir_lock
    cfg = apply_overrides(FinetuneConfig(), [*overrides, f"init_from={init}"])
    t = time.perf_counter()
    with workdir_lock.hold(workdir):  # as `bert-jax finetune`: two protocols sharing a run's
        metrics = finetune(cfg, workdir).metrics  # workdir broke its checkpoints (2026-12-07)
    return {"dev": {k: v for k, v in metrics["validation"].items() if k != "epoch"},
            "best_epoch": metrics["best_epoch"], "test": metrics["test"],
            "dev_by_epoch": [h[metrics["best_metric"]] for h in metrics["epochs"]],
            "wall_s": round(time.perf_counter() - t, 1)}


def export_fingerprint(pretrained: str) -> str:
    """sha256 of the export's weights and config: a workdir rebuilt in another session (runs/
    is not kept) joins a recipe's results only if its export is bit for bit the same."""
    return files_sha256([os.path.join(pretrained, "export", n)
                         for n in ("config.json", "model.safetensors")])


def random_fingerprint(model: str) -> str:
    """sha256 of a random-arm model's config, weights and vocabulary: all its fine-tuning reads
    besides the task's data, which the protocol fixes."""
    from bert_jax.model_files import paths
    return files_sha256([os.path.join(model, n) for n in ("config.json", "model.safetensors")]
                        + paths.vocab_files(model))


def shared_random_run(results: str, task: str, labels: int, rate: float, seed: int,
                      epochs: int, options: list[str], fingerprint: str) -> dict | None:
    """A random-arm run already on file, of any recipe, that is this run: the same random model
    (its sha256), task, labels, rate, seed, epochs and options. Exports of one shape and
    vocabulary (pretraining seeds) have the same random arm; within a session its runs repeat
    digit for digit, so it is run once and its record shared, naming where it came from."""
    for path in sorted(glob.glob(result_path(results, "*", task, labels, "random", rate,
                                             seed))):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        if (record.get("random_sha256") == fingerprint and record["epochs"] == epochs
                and record.get("options", []) == options):
            return {**record, "random_from": record.get("random_from")
                    or os.path.relpath(path, results)}
    return None


def _check_export(path: str, fingerprint: str) -> None:
    with open(path, encoding="utf-8") as f:
        saved = json.load(f).get("export_sha256")
    if saved is not None and saved != fingerprint:
        raise SystemExit(f"{path}: came from an export with sha256 {saved[:12]}…, not this "
                         f"one ({fingerprint[:12]}…): give this recipe another name")


def run_protocol(args, options: list[str]) -> None:
    for name, pretrained in args.recipe:
        if not os.path.isfile(os.path.join(pretrained, "export", "config.json")):
            raise SystemExit(f"{pretrained}/export: no exported model (run the pretraining "
                             f"to its end)")
        fingerprint = export_fingerprint(pretrained)
        for task, labels in args.tasks:
            files = task_files(task, labels, args.work, args.data)
            for seed in args.seeds:
                for arm in args.arms:
                    init = None
                    for rate in args.rates:
                        path = result_path(args.results, name, task, labels, arm, rate, seed)
                        if os.path.isfile(path):
                            _check_options(path, options)
                            _check_export(path, fingerprint)
                            continue
                        init = init or arm_model(arm, pretrained, seed,
                                                 os.path.join(args.work, "models", name),
                                                 args.redraw)
                        workdir = os.path.join(args.work, "runs", os.path.relpath(
                            path, args.results)[:-len(".json")])
                        overrides = [*task_overrides(task, files), f"epochs={args.epochs}",
                                     f"learning_rate={rate}", f"seed={seed}", *options]
                        random_sha = arm == "random" and random_fingerprint(init)
                        shared = random_sha and shared_random_run(
                            args.results, task, labels, rate, seed, args.epochs, options,
                            random_sha)
                        scores = ({k: shared[k] for k in SCORES} if shared
                                  else finetune_once(init, overrides, workdir))
                        record = {"recipe": name, "pretrained": pretrained, "task": task,
                                  "labels": labels, "arm": arm, "seed": seed, "rate": rate,
                                  "export_sha256": fingerprint,
                                  "epochs": args.epochs, "options": options,
                                  **({"redraw": args.redraw} if arm == "redrawn" else {}),
                                  **({"random_sha256": random_sha} if random_sha else {}),
                                  **({"random_from": shared["random_from"]} if shared else {}),
                                  **scores}
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path + ".tmp", "w", encoding="utf-8") as f:
                            json.dump(record, f, indent=1)
                        os.replace(path + ".tmp", path)
                        shutil.rmtree(workdir, ignore_errors=True)  # megabytes a run
                        key = HEADLINE[task]
                        print(f"{name} {task}:{labels} {arm} lr {rate:g} seed {seed}: dev "
                              f"{key} {scores['dev'][key]:.4f} (epoch {scores['best_epoch']}),"
                              f" test {scores['test'][key]:.4f}, "
                              + (f"the run of {shared['random_from']}" if shared
                                 else f"{scores['wall_s']:.0f} s"), flush=True)


def _check_options(path: str, options: list[str]) -> None:
    with open(path, encoding="utf-8") as f:
        saved = json.load(f).get("options", [])
    if saved != options:
        raise SystemExit(f"{path}: ran with options {saved}, not {options}: give this "
                         f"recipe another name for other options")


# -- summary -------------------------------------------------------------------------------------

def load_results(results: str) -> list[dict]:
    rows = []
    for folder, _, names in os.walk(results):
        for n in sorted(names):
            if n.startswith("lr") and n.endswith(".json"):
                with open(os.path.join(folder, n), encoding="utf-8") as f:
                    rows.append(json.load(f))
    return rows


def pick_rate(rows: list[dict], key: str) -> tuple[float, list[int]] | None:
    """The rate with the best mean dev score over the seeds that every rate has run (the test
    file plays no part), and those seeds; None before any seed has run at every rate."""
    by_rate: dict[float, dict[int, float]] = {}
    for r in rows:
        by_rate.setdefault(r["rate"], {})[r["seed"]] = r["dev"][key]
    seeds = sorted(set.intersection(*(set(s) for s in by_rate.values())))
    if not seeds:
        return None
    best = max(sorted(by_rate), key=lambda rate: statistics.mean(by_rate[rate][s]
                                                                  for s in seeds))
    return best, seeds


def paired_difference(pretrained: dict, random: dict) -> dict | None:
    """Test scores by seed, pretrained − random over the seeds both ran: mean, sd, the paired
    t-test's p (bench/compare_seeds.py) and the seeds ahead; None when no seed is shared."""
    common = sorted(set(pretrained) & set(random))
    if not common:
        return None
    pairs = [(pretrained[s], random[s]) for s in common]
    diffs = [a - b for a, b in pairs]
    stats = compare_seeds.welch([a for a, _ in pairs], [b for _, b in pairs], pairs)
    return {"seeds": common, "mean": statistics.mean(diffs),
            "sd": statistics.stdev(diffs) if len(diffs) > 1 else math.nan,
            "paired_p": stats.get("paired_p", math.nan), "wins": sum(d > 0 for d in diffs)}


def summarise(rows: list[dict], baselines: dict | None = None) -> dict:
    """{recipe: {task-labels: {arm: {...}, "pretrained - random": {...}}}} (see the module
    docstring)."""
    out: dict = {}
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["recipe"], r["task"], r["labels"]), {}).setdefault(
            r["arm"], []).append(r)
    for (recipe, task, labels), arms in sorted(groups.items()):
        key = HEADLINE[task]
        cell = out.setdefault(recipe, {}).setdefault(f"{task}-{labels}", {})
        tests = {}
        for arm, arm_rows in sorted(arms.items()):
            picked = pick_rate(arm_rows, key)
            if picked is None:
                continue
            rate, _ = picked
            at_rate = {r["seed"]: r for r in arm_rows if r["rate"] == rate}
            tests[arm] = {s: r["test"][key] for s, r in at_rate.items()}
            values = list(tests[arm].values())
            cell[arm] = {"rate": rate, "seeds": sorted(at_rate), "metric": key,
                         "test_by_seed": dict(sorted(tests[arm].items())),
                         "dev_mean": statistics.mean(r["dev"][key] for r in at_rate.values()),
                         "test_mean": statistics.mean(values),
                         "test_sd": statistics.stdev(values) if len(values) > 1 else math.nan,
                         "rates_tried": sorted({r["rate"] for r in arm_rows})}
        if "pretrained" in tests and "random" in tests:
            d = paired_difference(tests["pretrained"], tests["random"])
            if d:
                cell["pretrained - random"] = d
        if baselines and (task, labels) in baselines:
            cell["baseline"] = baselines[(task, labels)]
    return out


SEED_TAG = re.compile(r"^(?P<root>[^+]*?)-s(?P<seed>\d+)(?P<options>\+.*)?$")


def recipe_family(recipe: str) -> tuple[str, int]:
    """(family, pretraining seed): a recipe named ROOT-sN+OPTIONS is ROOT+OPTIONS pretrained
    with --config.seed=N; a name without -sN is seed 0."""
    m = SEED_TAG.match(recipe)
    return (m["root"] + (m["options"] or ""), int(m["seed"])) if m else (recipe, 0)


def pretraining_seeds(summary: dict) -> dict:
    """Fine-tuning seeds vary the head and the batch order; another pretraining run varies the
    export itself (MultiBERTs, Sellam et al. 2022), which one export per recipe cannot show.
    For each family of recipes that differ only in their pretraining seed, per task × labels
    that two or more exports ran: each export's pretrained − random (its own row), and over
    the fine-tuning seeds every export ran, the mean over exports of pretrained − random with
    its paired t-test's p (the exports averaged seed by seed, so a seed is one pair).
    {family: {task-labels: {"exports": {seed: {...}}, "mean over exports": {...}}}}."""
    families: dict = {}
    for recipe, cells in summary.items():
        family, seed = recipe_family(recipe)
        for name, cell in cells.items():
            if "pretrained - random" in cell:
                families.setdefault(family, {}).setdefault(name, {})[seed] = cell
    out: dict = {}
    for family, cells in sorted(families.items()):
        for name, by_export in sorted(cells.items()):
            if len(by_export) < 2:
                continue
            seeds = sorted(set.intersection(*(
                set(c["pretrained"]["test_by_seed"]) & set(c["random"]["test_by_seed"])
                for c in by_export.values())))
            mean = {arm: {s: statistics.mean(c[arm]["test_by_seed"][s]
                                             for c in by_export.values()) for s in seeds}
                    for arm in ("pretrained", "random")}
            out.setdefault(family, {})[name] = {
                "exports": {e: {"pretrained": c["pretrained"]["test_mean"],
                                "random": c["random"]["test_mean"],
                                "pretrained - random": c["pretrained - random"]}
                            for e, c in sorted(by_export.items())},
                "mean over exports": paired_difference(mean["pretrained"], mean["random"]),
                "between exports": spread(by_export)}
    return out


def spread(by_export: dict) -> dict:
    """How far exports of one recipe disagree: the sd of their pretrained − random means (each
    over its own fine-tuning seeds) and the exports a claim of +3 / +5 points would need."""
    means = [c["pretrained - random"]["mean"] for c in by_export.values()]
    sd = statistics.stdev(means)
    return {"sd": sd, **{f"exports for +{k}": exports_needed(sd, k / 100) for k in (3, 5)}}


def exports_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                   most: int = 1000) -> int | None:
    """How many exports a claim about a recipe needs: the smallest n whose one-sample,
    two-sided t-test over n exports' differences (spread sd) finds a true mean difference of
    `effect` at `alpha` with probability ≥ `power` (the noncentral t; d = 0.5 needs 34, as
    power tables give). None when sd is not a positive number or more than `most` are needed."""
    from scipy import stats
    if not sd > 0:
        return None
    for n in range(2, most + 1):
        t = stats.t.ppf(1 - alpha / 2, n - 1)
        nc = effect / sd * math.sqrt(n)
        # P(T < -t | nc) written as P(T > t | -nc): scipy's cdf gives nan where it underflows
        if stats.nct.sf(t, n - 1, nc) + stats.nct.sf(t, n - 1, -nc) >= power:
            return n
    return None


def seeds_table(pooled: dict) -> str:
    """pretraining_seeds as markdown: a row per family × task × labels."""
    lines = ["### the same recipe pretrained with other seeds (ROOT-sN+OPTIONS)", "",
             "| recipe | task | labels | each export: pretrained, pretrained − random (paired "
             "p, wins) | mean over exports: pretrained − random (paired p, wins) | sd between "
             "exports: exports for +3 / +5 (80% power) |", "|---|---|---|---|---|---|"]
    for family, cells in pooled.items():
        for name, cell in sorted(cells.items(), key=lambda kv: (kv[0].split("-")[0],
                                                                 int(kv[0].split("-")[1]))):
            task, labels = name.rsplit("-", 1)
            each = "; ".join(f"seed {e}: {100 * c['pretrained']:.1f}, "
                             f"{_difference(c['pretrained - random'])}"
                             for e, c in cell["exports"].items())
            between = cell["between exports"]
            need = " / ".join(str(between[f"exports for +{k}"] or "—") for k in (3, 5))
            lines.append(f"| {family} | {task} ({HEADLINE[task]} ×100) | {int(labels):,} | "
                         f"{each} | {_difference(cell['mean over exports'])} | "
                         f"{100 * between['sd']:.1f}: {need} |")
    lines.append("")
    return "\n".join(lines)


def best_options(rows: list[dict], min_seeds: int = 5) -> dict:
    """Each arm at its best fine-tuning options *and* rate, both picked on dev: an option can
    help one arm and hurt the other (layer-wise decay slows what random weights must learn), so
    a recipe's row alone can favour either arm. Among the recipes fine-tuned from one
    pretraining workdir, per task × labels × arm, the candidates are the (recipe, rate) pairs
    that ran ≥ min_seeds seeds; the one with the best mean dev score over the seeds every
    candidate ran wins (the test file plays no part), and the two arms' winners are paired by
    seed over the seeds both ran. {workdir: {task-labels: {arm: {...}, "pretrained - random":
    {...}}}}."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["pretrained"], r["task"], r["labels"]), {}).setdefault(
            r["arm"], {}).setdefault((r["recipe"], r["rate"]), {})[r["seed"]] = r
    out: dict = {}
    for (workdir, task, labels), arms in sorted(groups.items()):
        key, picks = HEADLINE[task], {}
        for arm in ("pretrained", "random"):
            runs = {c: s for c, s in arms.get(arm, {}).items() if len(s) >= min_seeds}
            seeds = sorted(set.intersection(*(set(s) for s in runs.values()))) if runs else []
            if len(seeds) < min_seeds:
                continue
            (recipe, rate), by_seed = max(sorted(runs.items()), key=lambda kv: statistics.mean(
                kv[1][s]["dev"][key] for s in seeds))
            picks[arm] = {s: r["test"][key] for s, r in by_seed.items()}
            values = [by_seed[s]["test"][key] for s in sorted(by_seed)]
            out.setdefault(workdir, {}).setdefault(f"{task}-{labels}", {})[arm] = {
                "recipe": recipe, "rate": rate, "options": by_seed[seeds[0]].get("options", []),
                "picked_over": seeds, "candidates": len(runs), "metric": key,
                "dev_mean": statistics.mean(by_seed[s]["dev"][key] for s in seeds),
                "seeds": sorted(by_seed), "test_mean": statistics.mean(values),
                "test_sd": statistics.stdev(values) if len(values) > 1 else math.nan}
        d = len(picks) == 2 and paired_difference(picks["pretrained"], picks["random"])
        if d:
            out[workdir][f"{task}-{labels}"]["pretrained - random"] = d
    return out


def _difference(d: dict | None) -> str:
    """A paired difference as the tables print it: mean ± sd ×100 (p, seeds ahead/seeds)."""
    if not d:
        return "—"
    p = d["paired_p"]
    return (f"{100 * d['mean']:+.1f} ± {100 * d['sd']:.1f} (p "
            f"{f'{p:.3f}' if not p < 0.001 else f'{p:.0e}'}, {d['wins']}/{len(d['seeds'])})")


def best_table(best: dict) -> str:
    """best_options as markdown: one table, a row per workdir × task × labels."""
    lines = ["### each arm at its best options and rate, both picked on dev", "",
             "| pretraining | task | labels | pretrained: recipe, rate | random: recipe, rate | "
             "pretrained − random (paired p, wins) |", "|---|---|---|---|---|---|"]
    for workdir, cells in best.items():
        for name, cell in sorted(cells.items(), key=lambda kv: (kv[0].split("-")[0],
                                                                 int(kv[0].split("-")[1]))):
            task, labels = name.rsplit("-", 1)

            def arm(a):
                c = cell.get(a)
                return (f"{100 * c['test_mean']:.1f} ± {100 * c['test_sd']:.1f}: {c['recipe']}, "
                        f"{c['rate']:g}" if c else "—")
            diff = _difference(cell.get("pretrained - random"))
            lines.append(f"| {workdir} | {task} ({HEADLINE[task]} ×100) | {int(labels):,} | "
                         f"{arm('pretrained')} | {arm('random')} | {diff} |")
    lines.append("")
    return "\n".join(lines)


def baseline_scores(task: str, files: dict) -> dict:
    """A practitioner's first try without BERT, on the same train / dev / test files."""
    if task == "fine_foods":
        return tfidf_baseline(files)
    return frequent_tag_baseline(files)


def tfidf_baseline(files: dict) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import matthews_corrcoef

    def read(path):
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        return [r["text"] for r in rows], [r["label"] for r in rows]
    (xt, yt), (xd, yd), (xs, ys) = (read(files[s]) for s in ("train", "validation", "test"))
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(xt)
    fits = {c: LogisticRegression(C=c, max_iter=2000).fit(vec.transform(xt), yt)
            for c in (0.1, 1.0, 10.0, 100.0)}
    c = max(fits, key=lambda c: matthews_corrcoef(yd, fits[c].predict(vec.transform(xd))))
    return {"name": "TF-IDF 1–2-grams + logistic regression", "C": c, "metric": "mcc",
            "test": float(matthews_corrcoef(ys, fits[c].predict(vec.transform(xs))))}


def frequent_tag_baseline(files: dict) -> dict:
    from collections import Counter, defaultdict

    from bert_jax.tasks.token_classification.data import read_conll
    sentences, tags = read_conll(files["train"], column=1)
    counts: dict = defaultdict(Counter)
    for words, row in zip(sentences, tags):
        for w, t in zip(words, row):
            counts[w.lower()][t] += 1
    overall = Counter(t for row in tags for t in row).most_common(1)[0][0]
    words, gold = read_conll(files["test"], column=1)
    pairs = [(counts[w.lower()].most_common(1)[0][0] if counts[w.lower()] else overall, t)
             for ws, ts in zip(words, gold) for w, t in zip(ws, ts)]
    return {"name": "most frequent tag of each word (else the most frequent tag)",
            "metric": "accuracy", "test": sum(p == t for p, t in pairs) / len(pairs)}


def table(summary: dict) -> str:
    lines = []
    for recipe, cells in summary.items():
        lines += [f"### {recipe}", "",
                  "| task | labels | pretrained (rate) | random (rate) | pretrained − random "
                  "(paired p, wins) | seeds | baseline |", "|---|---|---|---|---|---|---|"]
        for name, cell in sorted(cells.items(), key=lambda kv: (kv[0].split("-")[0],
                                                                 int(kv[0].split("-")[1]))):
            task, labels = name.rsplit("-", 1)

            def arm(a):
                if a not in cell:
                    return "—"
                c = cell[a]
                return (f"{100 * c['test_mean']:.1f} ± {100 * c['test_sd']:.1f} "
                        f"({c['rate']:g})")
            d = cell.get("pretrained - random")
            diff = _difference(d)
            n = len(d["seeds"]) if d else max((len(cell[a]["seeds"]) for a in cell
                                               if a in ARMS), default=0)
            base = cell.get("baseline")
            lines.append(f"| {task} ({HEADLINE[task]} ×100) | {int(labels):,} | {arm('pretrained')}"
                         f" | {arm('random')} | {diff} | {n} | "
                         f"{100 * base['test']:.1f} |" if base else
                         f"| {task} ({HEADLINE[task]} ×100) | {int(labels):,} | "
                         f"{arm('pretrained')} | {arm('random')} | {diff} | {n} | — |")
        lines.append("")
    return "\n".join(lines)


def _curve(ax, cells: dict, arm: str, colour, label: str) -> None:
    """One arm's fine_foods test score against labels, mean ± sd over seeds."""
    pts = sorted((int(k.split("-")[1]), c[arm]) for k, c in cells.items()
                 if k.startswith("fine_foods-") and arm in c)
    if pts:
        ax.errorbar([p[0] for p in pts], [100 * p[1]["test_mean"] for p in pts],
                    yerr=[100 * p[1]["test_sd"] for p in pts],
                    fmt="o-" if arm == "pretrained" else "s--", capsize=3, color=colour,
                    alpha=1.0 if arm == "pretrained" else 0.6, label=label)


def picture(summary: dict, best: dict, path: str) -> None:
    """Label efficiency: fine_foods test MCC against labelled reviews, mean ± sd over seeds, the
    export (solid) beside random weights (dashed, same colour), TF-IDF dotted. Left, each arm at
    its best options and rate picked on dev (one line pair per pretraining workdir); middle, the
    recipes measured at two or more label counts, one recipe's options on both arms; right, POS."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, mx, bx) = plt.subplots(1, 3, figsize=(15, 4.6),
                                     gridspec_kw={"width_ratios": [3, 3, 2]})
    mx.sharey(ax)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {r: colours[i % len(colours)] for i, r in enumerate(summary)}  # one per recipe
    for i, (workdir, cells) in enumerate(best.items()):
        if sum(k.startswith("fine_foods-") for k in cells) < 2:
            continue
        for arm in ("pretrained", "random"):
            _curve(ax, cells, arm, colours[i % len(colours)],
                   f"{workdir} export" if arm == "pretrained" else f"{workdir}: random weights")
    base, pos_base = {}, []
    shown = [r for r, cells in summary.items()
             if sum(k.startswith("fine_foods-") for k in cells) >= 2]
    for recipe in shown:
        for arm in ("pretrained", "random"):
            _curve(mx, summary[recipe], arm, colour[recipe],
                   f"{recipe} export" if arm == "pretrained" else f"{recipe}: random weights")
    pos_rows = []  # horizontal bars, a recipe a row: its names stay readable however many
    for recipe, cells in summary.items():
        for k, c in sorted(cells.items()):
            if "baseline" in c:
                if k.startswith("fine_foods-"):
                    base[int(k.split("-")[1])] = c["baseline"]["test"]
                elif k.startswith("pos-"):
                    pos_base.append(c["baseline"]["test"])
            if k.startswith("pos-"):
                y = len(pos_rows)
                pos_rows.append(recipe)
                for arm, dy in (("pretrained", -0.2), ("random", 0.2)):
                    if arm in c:
                        bx.barh(y + dy, 100 * c[arm]["test_mean"], height=0.4,
                                xerr=100 * c[arm]["test_sd"], capsize=2, color=colour[recipe],
                                alpha=1.0 if arm == "pretrained" else 0.45)
    for panel, title in ((ax, "each arm at its best options and rate (picked on dev)"),
                         (mx, "one recipe's options on both arms")):
        if base:
            panel.plot(sorted(base), [100 * base[n] for n in sorted(base)], "kx:",
                       label="TF-IDF 1–2-grams + logistic regression")
            panel.set_xlim(min(base) / 1.4, max(base) * 1.4)
        panel.set_xscale("log")
        panel.minorticks_off()
        if base:
            panel.set_xticks(sorted(base), [f"{n:,}" for n in sorted(base)])
        panel.set_title(title, fontsize=9)
        panel.set_xlabel("labelled training reviews (fine_foods)")
        panel.set_ylabel("test MCC ×100")
        panel.legend(fontsize=7)
        panel.grid(alpha=0.3)
    from matplotlib.patches import Patch
    handles = [Patch(color="grey", label="export"),
               Patch(color="grey", alpha=0.45, label="random weights")]
    if pos_base:
        handles.append(bx.axvline(100 * pos_base[0], color="k", linestyle=":",
                                  label="most frequent tag"))
    bx.legend(handles=handles, fontsize=7, loc="lower right")
    bx.set_yticks(range(len(pos_rows)), pos_rows, fontsize=7)
    bx.invert_yaxis()
    bx.set_title("a word-order task", fontsize=9)
    bx.set_xlabel("POS word accuracy ×100 (test)")
    bx.set_xlim(50, 112)  # room on the right for the legend
    bx.set_xticks(range(50, 101, 10))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_summary(args) -> dict:
    rows = load_results(args.results)
    baselines = {}
    for task, labels in sorted({(r["task"], r["labels"]) for r in rows}):
        baselines[(task, labels)] = baseline_scores(task, task_files(task, labels, args.work,
                                                                     args.data))
    summary = summarise(rows, baselines)
    best = best_options(rows)
    pooled = pretraining_seeds(summary)
    text = table(summary) + "\n" + best_table(best) + ("\n" + seeds_table(pooled)
                                                      if pooled else "")
    print(text)
    with open(os.path.join(args.results, "pays.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(args.results, "pays.json"), "w", encoding="utf-8") as f:
        json.dump({"recipes": summary, "best_options": best, "pretraining_seeds": pooled},
                  f, indent=1)
    if summary:
        picture(summary, best, os.path.join(args.results, "pays.png"))
        from bert_jax.runtime import environment
        environment.write_beside(os.path.join(args.results, "pays.png"))  # the figure's machine
    return summary


# -- command line --------------------------------------------------------------------------------

def _recipe(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAME=PRETRAINING_WORKDIR, got {text!r}")
    return name, path


def _task(text: str) -> tuple[str, int]:
    task, sep, labels = text.partition(":")
    if task not in HEADLINE or not sep or not labels.isdigit():
        raise argparse.ArgumentTypeError(f"expected fine_foods:N or pos:N, got {text!r}")
    return task, int(labels)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", type=_recipe, action="append", default=[],
                        help="NAME=PRETRAINING_WORKDIR (its export/ is fine-tuned)")
    parser.add_argument("--tasks", default="fine_foods:250,fine_foods:1000,fine_foods:3000,"
                                           "pos:500")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--rates", default="1e-4,3e-4,1e-3")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--arms", default="pretrained,random", help=f"of {', '.join(ARMS)}")
    parser.add_argument("--redraw", default="layer_1/attention/(query|key)",
                        help="the arm `redrawn`: parameters whose path matches this regular "
                             "expression are redrawn at the model's init")
    parser.add_argument("--results", default=os.path.join(ROOT, "bench", "pays"))
    parser.add_argument("--work", default="runs/pays", help="split data, models, workdirs")
    parser.add_argument("--data", default="runs/task_data", help="bench/task_data.py's OUT_DIR")
    parser.add_argument("--summary", action="store_true", help="only the table and picture")
    args, rest = parser.parse_known_args(argv)
    options = [a[len("--config."):] for a in rest if a.startswith("--config.")]
    if len(options) != len(rest):
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    args.tasks = [_task(t) for t in args.tasks.split(",")]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.rates = [float(r) for r in args.rates.split(",")]
    args.arms = args.arms.split(",")
    unknown = sorted(set(args.arms) - set(ARMS))
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)} ({', '.join(ARMS)})")
    if not args.summary:
        if not args.recipe:
            parser.error("give --recipe NAME=PRETRAINING_WORKDIR (or --summary)")
        import jax  # every run compiles the same few programs: keep them across runs
        jax.config.update("jax_compilation_cache_dir", os.path.abspath(os.path.join(
            args.work, "xla")))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        run_protocol(args, options)
    write_summary(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
