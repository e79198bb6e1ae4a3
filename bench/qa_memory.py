"""Peak memory and time of question answering on one long context asked many questions.

Writes a SQuAD JSON file with one context of --context-chars characters (Jane Austen's novels,
whitespace collapsed) and N questions about it, then runs `bert-jax predict` on it with a tiny
random BertForQuestionAnswering (2 layers, width 32, the bundled Austen vocabulary) in a child
process, once per N. Reports the child's peak RSS (its ru_maxrss) and wall time as a markdown
table, with the windows the questions make and the CPU. Prints only; writes nothing beside the
temporary directory.

Contexts are never cut: a 1M-character context makes about 1,000 windows of 384 tokens per
question, so N questions make N × 1,000 windows. Before question answering was windowed lazily
(tasks/question_answering/windows.py), all of them were held as arrays until the job ended.
Since 2026-12-06 (issue 39) the context is tokenized once, not once per question (~2 s each at
1M characters), each question's windows are put together from its tokens and the context's,
and the model runs long windows a few rows at a time: a question costs ~3.7 s here, 3.6 of
them the model's forward (8.8 s before; --profile splits the time). 1M characters × 10 / 100 /
600 / 1,000 questions: 0.54 / 0.51 / 0.51 / 0.49 GiB peak, 45 / 370 / 2,160 / 1,809 s (AMD EPYC,
AVX-512 f/bw/cd/dq/ifma/vl/vbmi/vbmi2/vnni/bf16/bitalg/vpopcntdq; 2 cores shared, the last on one
core of its own; bench/RESULTS.md).

  python bench/qa_memory.py [N ...] [--context-chars 1000000] [--max-seq-length 384]
                            [--doc-stride 128] [--batch-size 32] [--jsonl] [--profile]

N defaults to 10 100. --jsonl gives the questions as jsonl rows (question, context, id), one
copy of the context per row, as code before SQuAD JSON input reads them. --profile instead
times the parts of `answer_questions` in this process for each N, compilation excluded:
tokenizing and counting (`Windows(...)`), putting windows together (iterating it), the
model's forward, the best-span search (`BestSpans.add`).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

# a launcher keeps the measured child's ru_maxrss its own: Linux keeps ru_maxrss across exec, so
# a child forked straight from a process that imported JAX would start from that peak
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
PEAK = ("import resource, sys\nfrom bert_jax import cli\ncode = cli.main(sys.argv[1:])\n"
        "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
        "file=sys.stderr)\nsys.exit(code)\n")


def context_text(chars: int) -> str:
    """`chars` characters of the bundled novels, one paragraph (whitespace collapsed)."""
    from bert_jax import resources
    text = ""
    for path in sorted(glob.glob(resources.bundled("austen/*.txt"))):
        with open(path, encoding="utf-8") as f:
            text += " " + " ".join(f.read().split())
        if len(text) > chars:
            break
    if len(text) <= chars:
        raise SystemExit(f"--context-chars: the novels hold only {len(text) - 1} characters")
    return text[1:chars + 1]


def questions(n: int) -> list[dict]:
    return [{"id": f"q{i}", "question": f"What did the letter in chapter {i} say about Emma?"}
            for i in range(n)]


def write_input(path: str, context: str, qas: list[dict], jsonl: bool) -> None:
    with open(path, "w", encoding="utf-8") as f:
        if jsonl:
            for qa in qas:
                f.write(json.dumps(dict(qa, context=context)) + "\n")
        else:
            json.dump({"version": "1.1", "data": [{"title": "austen", "paragraphs": [
                {"context": context, "qas": [dict(qa, answers=[]) for qa in qas]}]}]}, f)


def make_model(directory: str, max_positions: int) -> str:
    """A seeded random BertForQuestionAnswering with the bundled Austen vocabulary."""
    import jax
    import jax.numpy as jnp

    from bert_jax import resources
    from bert_jax.model_files import paths
    from bert_jax.model_files.huggingface import save_hf
    from bert_jax.models import BertForQuestionAnswering
    from bert_jax.models.config import BertConfig
    vocab = resources.bundled("austen/vocab")
    with open(os.path.join(vocab, "vocab.txt"), encoding="utf-8") as f:
        size = sum(1 for _ in f)
    config = BertConfig(vocab_size=size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=max_positions, id2label=("start", "end"))
    ids = jnp.zeros((1, 8), jnp.int32)
    params = BertForQuestionAnswering(config).init(jax.random.PRNGKey(0), ids, ids,
                                                   jnp.ones_like(ids))["params"]
    save_hf(directory, config, params, paths.vocab_files(vocab),
            architecture="BertForQuestionAnswering")
    return directory


def count_windows(model: str, context: str, qas: list[dict], max_length: int,
                  stride: int) -> int:
    from bert_jax.data.tokenizer import load
    from bert_jax.tasks.question_answering import windows
    from bert_jax.tasks.question_answering.data import QAExample
    examples = [QAExample(q["id"], q["question"], context, (), ()) for q in qas]
    return len(windows.Windows(load(model), examples, max_length, stride, "bench"))


def run_predict(model: str, source: str, output: str, args) -> tuple[int, float, int]:
    """(peak RSS bytes, wall seconds, answers written) of one `bert-jax predict` child."""
    command = [sys.executable, "-c", LAUNCHER, sys.executable, "-c", PEAK, "predict", model,
               "--input", source, "--output", output, "--max-seq-length",
               str(args.max_seq_length), "--doc-stride", str(args.doc_stride),
               "--batch-size", str(args.batch_size)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"predict failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    peak = int(proc.stderr.strip().splitlines()[-1].split()[1])
    with open(output, encoding="utf-8") as f:
        return peak, wall, sum(1 for _ in f)


def profile(model: str, context: str, qas: list[dict], args) -> dict[str, float]:
    """Seconds of each part of answering `qas` (answer_questions' steps, timed one by one)."""
    import functools

    import jax
    import numpy as np

    import bert_jax.tasks.question_answering as qa
    from bert_jax import inference
    from bert_jax.tasks.question_answering import answers, windows
    from bert_jax.tasks.question_answering.data import QAExample
    from bert_jax.tasks.task import inputs_of
    config, params, tok = inference.load(model)
    apply = functools.partial(inference.jitted(qa._span_logits), config,
                              jax.device_put(params))
    length = args.max_seq_length
    warm = {k: np.zeros((args.batch_size, length), np.int32)
            for k in ("input_ids", "token_type_ids", "attention_mask")}
    jax.block_until_ready(apply(warm))  # compiled before the clock starts
    examples = [QAExample(q["id"], q["question"], context, (), ()) for q in qas]
    parts = dict.fromkeys(("tokenize and count", "put windows together", "model forward",
                           "best-span search"), 0.0)
    start = time.perf_counter()
    found = windows.Windows(tok, examples, length, args.doc_stride, "bench")
    parts["tokenize and count"] = time.perf_counter() - start
    spans = answers.BestSpans(examples)
    chunks = iter(found)
    while True:
        start = time.perf_counter()
        feats = next(chunks, None)
        parts["put windows together"] += time.perf_counter() - start
        if feats is None:
            break
        start = time.perf_counter()
        logits = inference.run_batched(apply, inputs_of(feats), args.batch_size)
        parts["model forward"] += time.perf_counter() - start
        start = time.perf_counter()
        spans.add(*logits, feats)
        parts["best-span search"] += time.perf_counter() - start
    assert len(spans.answers()) == len(qas)
    return dict(parts, windows=len(found))


def cpu_line() -> str:
    from bert_jax.runtime import environment
    cpu = environment.record()["cpu"]
    return (f"CPU: {cpu['model']}, {cpu['usable_cores']} usable cores, "
            f"{' '.join(cpu['flags']) or 'no avx2/avx512/amx'}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("counts", nargs="*", type=int, default=[10, 100], metavar="N")
    parser.add_argument("--context-chars", type=int, default=1_000_000)
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--jsonl", action="store_true", help="jsonl rows, not SQuAD JSON")
    parser.add_argument("--profile", action="store_true",
                        help="time the parts of answering in this process instead")
    args = parser.parse_args(argv)
    context = context_text(args.context_chars)
    rows = []
    with tempfile.TemporaryDirectory(prefix="qa_memory-") as tmp:
        model = make_model(os.path.join(tmp, "model"), max(512, args.max_seq_length))
        if args.profile:
            print("| questions | windows | part | seconds | per question | share |")
            print("|---:|---:|---|---:|---:|---:|")
            for n in args.counts:
                parts = profile(model, context, questions(n), args)
                windows = parts.pop("windows")
                total = sum(parts.values())
                for name, seconds in parts.items():
                    print(f"| {n:,} | {windows:,} | {name} | {seconds:.3f} | {seconds / n:.4f} "
                          f"| {100 * seconds / total:.0f}% |", flush=True)
            print(f"\n{cpu_line()}")
            return
        for n in args.counts:
            qas = questions(n)
            source = os.path.join(tmp, f"questions-{n}.{'jsonl' if args.jsonl else 'json'}")
            write_input(source, context, qas, args.jsonl)
            windows = count_windows(model, context, qas, args.max_seq_length, args.doc_stride)
            peak, wall, answers = run_predict(model, source, os.path.join(tmp, "out.jsonl"),
                                              args)
            assert answers == n, (answers, n)
            rows.append((n, windows, peak, wall))
            print(f"N={n}: {windows:,} windows, peak {peak / 2**30:.2f} GiB, {wall:.0f} s",
                  file=sys.stderr, flush=True)
    print(f"`bert-jax predict` on a {'jsonl' if args.jsonl else 'SQuAD JSON'} file: one "
          f"{args.context_chars:,}-character context, N questions; max_seq_length "
          f"{args.max_seq_length}, doc_stride {args.doc_stride}, batch {args.batch_size}, "
          f"a 2-layer width-32 random model\n")
    print("| questions | windows | peak RSS (GiB) | wall (s) | ms per window |")
    print("|---:|---:|---:|---:|---:|")
    for n, windows, peak, wall in rows:
        print(f"| {n:,} | {windows:,} | {peak / 2**30:.2f} | {wall:.0f} | "
              f"{1000 * wall / windows:.1f} |")
    print(f"\n{cpu_line()}")


if __name__ == "__main__":
    main()
