"""bench/qa_memory.py at a tiny size: its SQuAD file is read back as written, and one
`predict` child reports its peak RSS and the windows its questions make; --profile splits the
time of answering into its parts; predict's forward on long windows runs a few rows at a time
with the same bits."""

import json

import numpy as np
from conftest import bench_module

from bert_jax.tasks.question_answering import data


def test_the_benchmark_file_and_a_tiny_run(tmp_path, capsys):
    bench = bench_module("qa_memory")
    context = bench.context_text(5_000)
    assert len(context) == 5_000 and "  " not in context and "\n" not in context
    path = str(tmp_path / "q.json")
    bench.write_input(path, context, bench.questions(3), jsonl=False)
    examples = data.read_squad_questions(path)
    assert [e.id for e in examples] == ["q0", "q1", "q2"]
    assert all(e.context is examples[0].context == context for e in examples)  # one string
    bench.write_input(str(tmp_path / "q.jsonl"), context, bench.questions(2), jsonl=True)
    rows = [json.loads(line) for line in open(tmp_path / "q.jsonl", encoding="utf-8")]
    assert [r["context"] for r in rows] == [context] * 2

    bench.main(["2", "--context-chars", "5000", "--max-seq-length", "64", "--doc-stride", "16"])
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("| 2 |")]
    _, n, windows, peak, wall, per_window, _ = [c.strip() for c in row.split("|")]
    assert int(windows.replace(",", "")) >= 2 * 25  # ~1,100 tokens, 35 new ones a window
    assert 0.1 < float(peak) < 2.0 and float(wall) > 0
    assert "CPU: " in out

    bench.main(["2", "--context-chars", "5000", "--max-seq-length", "64", "--doc-stride", "16",
                "--profile"])
    out = capsys.readouterr().out
    parts = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
             if line.startswith("| 2 |")]
    assert [p[2] for p in parts] == ["tokenize and count", "put windows together",
                                     "model forward", "best-span search"]
    assert {p[1] for p in parts} == {windows}  # the windows predict made
    assert sum(float(p[3]) for p in parts) > 0 and "CPU: " in out  # ms on a fast CPU
    assert 97 <= sum(int(p[5].rstrip("%")) for p in parts) <= 103  # shares of one total


def test_long_windows_of_a_narrow_model_run_a_few_rows_at_a_time_with_the_same_bits(tmp_path):
    """predict's forward runs a batch whose attention scores would not stay in cache a few rows
    at a time (lax.map): on the benchmark's model at 384 tokens, 8 rows run 4 at a time, and
    the logits, so the answers, are the same bits as the whole batch at once."""
    import jax

    import bert_jax.tasks.question_answering as qa
    from bert_jax import inference
    from bert_jax.runtime import xla_options
    from bert_jax.tasks.question_answering import answers, windows
    from bert_jax.tasks.question_answering.data import QAExample
    from bert_jax.tasks.task import inputs_of
    bench = bench_module("qa_memory")
    config, params, tok = inference.load(bench.make_model(str(tmp_path / "model"), 512))
    assert qa._rows_at_once(config, 8, 384) == 4 and qa._rows_at_once(config, 32, 384) == 4
    assert qa._rows_at_once(config, 32, 128) == 32  # short windows: the batch at once
    assert qa._rows_at_once(config, 7, 384) == 7  # no divisor of at least 2 rows
    context = bench.context_text(6_000)
    examples = [QAExample(f"q{i}", f"What did Emma say in part {i}?", context, (), ())
                for i in range(2)]
    (feats,) = list(windows.Windows(tok, examples, 384, 128, "test"))
    assert len(feats["input_ids"]) >= 8

    def forward(scores_bytes):
        qa._SCORES_BYTES = scores_bytes  # read when traced: a new function each time
        fn = jax.jit(lambda p, b: qa._span_logits(config, p, b),
                     compiler_options=xla_options.forward("float32"))
        try:
            return inference.run_batched(lambda b: fn(params, b), inputs_of(feats), 8)
        finally:
            qa._SCORES_BYTES = default

    default = qa._SCORES_BYTES
    grouped, whole = forward(default), forward(1 << 40)
    assert all(np.array_equal(g, w) for g, w in zip(grouped, whole))
    found = []
    for start, end in (grouped, whole):
        spans = answers.BestSpans(examples)
        spans.add(start, end, feats)
        found.append(spans.answers())
    assert found[0] == found[1]
    batch = {k: v[:8] for k, v in inputs_of(feats).items()}
    assert "scan" in str(jax.make_jaxpr(lambda b: qa._span_logits(config, params, b))(batch))
