"""bench/qa_memory.py at a tiny size: its SQuAD file is read back as written, and one
`predict` child reports its peak RSS and the windows its questions make; --profile splits the
time of answering into its parts."""

import json

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
    assert sum(float(p[3]) for p in parts) > 0 and "CPU: " in out
