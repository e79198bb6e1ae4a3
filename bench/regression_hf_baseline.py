"""Regression (STS-B's head) with `bert-jax finetune --task regression` and with transformers +
PyTorch on exactly the same recipe, over several seeds (README "GLUE", issue 26).

Data: sentence pairs sharing k of their 5 words, scored 5k/5 (tests/task_fixtures.py
similarity_files; offline, and the words decide the score). Both frameworks get the SAME features
(our tokenizer and tasks/regression's encoding), the SAME batch order
(bert_jax.data.batches.batch_indices), AdamW b1 .9 b2 .999 eps 1e-6, weight decay 0.01 on ≥2-D
params only, 10% warmup then linear decay, clip 1.0, MSE on one output
(BertForSequenceClassification num_labels=1, problem_type="regression"); validation after each
epoch with OUR scorer (tasks/regression.regression_scores), the best epoch by Pearson kept, as
`finetune` does. What differs: the fresh head's init, dropout masks, float summation order.

    python bench/regression_hf_baseline.py MODEL_DIR --seeds 0,1,2 [--threads 2]
"""

import argparse
import json
import os
import pathlib
import tempfile
import time

import numpy as np

from bench_common import tests_module

from bert_jax import cli
from bert_jax.data import batches, tokenizer
from bert_jax.tasks import TASKS
from bert_jax.training.finetune_config import FinetuneConfig

task_fixtures = tests_module("task_fixtures")  # the tests' similarity data

INPUTS = ("input_ids", "token_type_ids", "attention_mask")
DEFAULTS = FinetuneConfig()

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("init_dir")
p.add_argument("--train", type=int, default=512)
p.add_argument("--validation", type=int, default=256)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--lr", type=float, default=1e-4)
p.add_argument("--max-seq-length", type=int, default=24)
p.add_argument("--seeds", default="0,1,2")
p.add_argument("--threads", type=int, default=2)
args = p.parse_args()
seeds = [int(s) for s in args.seeds.split(",")]
work = tempfile.mkdtemp(prefix="regression_bench_")
files = task_fixtures.similarity_files(pathlib.Path(work), args.train, args.validation)
COLUMNS = dict(text_column="sentence1", text_pair_column="sentence2", label_column="score")
FLAGS = ["--text-column", "sentence1", "--text-pair-column", "sentence2", "--label-column",
         "score", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
         "--learning-rate", str(args.lr), "--max-seq-length", str(args.max_seq_length)]


def ours(seed):
    start = time.time()
    workdir = os.path.join(work, f"ours-{seed}")
    code = cli.main(["finetune", "--task", "regression", "--init", args.init_dir, "--train",
                     str(files["train"]), "--validation", str(files["validation"]),
                     "--workdir", workdir, "--seed", str(seed), *FLAGS])
    assert code == 0
    with open(os.path.join(workdir, "metrics.json")) as f:
        result = json.load(f)
    return [e["pearson"] for e in result["epochs"]], time.time() - start


def theirs(seed):
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)
    start = time.time()
    cfg = FinetuneConfig(task="regression", init_from=args.init_dir, train_file=str(files["train"]),
                         validation_file=str(files["validation"]),
                         max_seq_length=args.max_seq_length, **COLUMNS)
    data = TASKS["regression"].load(cfg, tokenizer.load(args.init_dir))
    x = {k: torch.from_numpy(np.asarray(v)) for k, v in data.train.items()}
    x = {k: v.long() if k != "labels" else v.float() for k, v in x.items()}
    valid = data.evals["validation"]
    v = {k: torch.from_numpy(np.asarray(valid.inputs[k], np.int64)) for k in INPUTS}
    model = transformers.BertForSequenceClassification.from_pretrained(
        args.init_dir, num_labels=1, problem_type="regression")
    n = len(x["input_ids"])
    per_epoch = batches.steps_per_epoch(data.train, args.batch_size)
    total = per_epoch * args.epochs
    named = list(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [q for _, q in named if q.ndim >= 2], "weight_decay": DEFAULTS.weight_decay},
         {"params": [q for _, q in named if q.ndim < 2], "weight_decay": 0.0}],
        lr=args.lr, betas=(DEFAULTS.adam_b1, DEFAULTS.adam_b2), eps=DEFAULTS.adam_eps)
    sched = transformers.get_linear_schedule_with_warmup(
        opt, int(round(DEFAULTS.warmup_ratio * total)), total)
    pearsons = []
    for step in range(total):
        model.train()
        idx = torch.from_numpy(np.asarray(batches.batch_indices(n, step, args.batch_size, seed),
                                          np.int64))
        out = model(**{k: x[k][idx] for k in INPUTS}, labels=x["labels"][idx])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), DEFAULTS.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad()
        if (step + 1) % per_epoch == 0:
            model.eval()
            with torch.no_grad():
                predicted = torch.cat([model(**{k: t[i:i + 64] for k, t in v.items()}).logits
                                       for i in range(0, len(v["input_ids"]), 64)])[:, 0]
            scores, _ = valid.score(predicted.numpy()[:, None])  # regression_scores, as ours
            pearsons.append(scores["pearson"])
    return pearsons, time.time() - start


rows = []
for seed in seeds:
    for name, fn in (("bert-jax", ours), ("transformers + PyTorch", theirs)):
        per_epoch, seconds = fn(seed)
        rows.append({"framework": name, "seed": seed, "pearson_per_epoch": per_epoch,
                     "best_pearson": max(per_epoch), "seconds": round(seconds, 1)})
        print(json.dumps(rows[-1]), flush=True)
for name in ("bert-jax", "transformers + PyTorch"):
    best = [r["best_pearson"] for r in rows if r["framework"] == name]
    last = [r["pearson_per_epoch"][-1] for r in rows if r["framework"] == name]
    print(f"{name}: best-epoch Pearson mean {np.mean(best):.4f} ± {np.std(best):.4f} "
          f"({', '.join(f'{b:.4f}' for b in best)}); last epoch mean {np.mean(last):.4f}")
