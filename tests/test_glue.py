"""`bert-jax glue` end to end on the fixtures in GLUE's download layout (tests/fixtures/glue)
with a tiny random BERT: each task's dev scores are scikit-learn's / scipy's on the kept model's
predictions, the submission files are the server's names, header, indices and label values and
hold that model's test predictions, and a killed run resumed gives the same table."""

import json
import os
import signal

import numpy as np
import pytest
from task_fixtures import random_bert_dir
from test_glue_data import FIXTURES

from bert_jax import cli
from bert_jax.glue import benchmark, reading, submission
from bert_jax.glue.benchmark import BENCHMARK

FLAGS = ("--epochs", "1", "--batch-size", "8", "--max-seq-length", "32",
         "--eval-batch-size", "8", "--data-dir", FIXTURES)


@pytest.fixture(scope="module")
def init(minilm_dir, tmp_path_factory):
    """A random 2-layer H64 Hugging Face BertModel with MiniLM's real vocabulary."""
    return random_bert_dir(tmp_path_factory.mktemp("glue") / "init", minilm_dir, hidden=64)


def glue(init, workdir, *extra):
    return cli.main(["glue", "--init", init, "--workdir", str(workdir), *FLAGS, *extra])


@pytest.fixture(scope="module")
def run(init, tmp_path_factory):
    work = tmp_path_factory.mktemp("glue_run") / "w"
    assert glue(init, work, "--tasks", "cola,mrpc,sts-b,mnli", "--learning-rates", "1e-3") == 0
    return work, json.loads((work / "results.json").read_text())


def _predicted(work, run_dir, rows, task):
    """`bert-jax predict` with the run's kept model on rows (a jsonl file of the split)."""
    import pandas as pd
    path = work / "predict_in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = work / "predict_out.jsonl"
    extra = ["--text-pair-column", "sentence2"] if task.pair else []
    assert cli.main(["predict", str(work / run_dir), "--input", str(path), "--output", str(out),
                     "--text-column", "sentence1", "--max-seq-length", "32",
                     *extra]) == 0
    frame = pd.read_json(out, lines=True, dtype=False)
    column = "predicted_value" if task.regression else "predicted_label"
    return [v if task.regression else str(v) for v in frame[column]]


def test_every_score_is_the_reference_implementations(run):
    from scipy import stats
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    work, results = run
    assert list(results["tasks"]) == ["CoLA", "MRPC", "STS-B", "MNLI"]
    for name, found in results["tasks"].items():
        task = BENCHMARK[name]
        assert [found["best"]] == found["runs"]  # one rate: the grid's best is the last test's
        for record in found["runs"]:
            assert record["score"] == pytest.approx(np.mean([record["scores"][m]
                                                             for m in task.metrics]))
            for split in task.scored_splits():
                rows = reading.read_local(task, split, FIXTURES).rows
                truth = [r["label"] for r in rows]
                guess = _predicted(work, record["run"], rows, task)
                got = record["scores"]
                if task.regression:
                    assert got["pearson"] == pytest.approx(stats.pearsonr(guess, truth)[0],
                                                           abs=1e-4)
                    assert got["spearman"] == pytest.approx(stats.spearmanr(guess, truth)[0],
                                                            abs=1e-4)
                elif name == "CoLA":
                    assert got["mcc"] == pytest.approx(matthews_corrcoef(truth, guess),
                                                       abs=1e-12)
                elif name == "MRPC":
                    assert got["f1"] == pytest.approx(f1_score(truth, guess, pos_label="1",
                                                               zero_division=0))
                    assert got["accuracy"] == pytest.approx(accuracy_score(truth, guess))
                else:
                    key = "matched_accuracy" if split == "validation" else "mismatched_accuracy"
                    assert got[key] == pytest.approx(accuracy_score(truth, guess))
    average = np.mean([found["best"]["score"] for found in results["tasks"].values()])
    assert results["average"] == pytest.approx(average)
    table = (work / "results.md").read_text()
    assert "| | CoLA | MRPC | STS-B | MNLI-m/mm | Average |" in table
    assert f"| {100 * results['average']:.1f} |" in table


def test_submission_files_hold_the_best_models_test_predictions(run):
    work, results = run
    files = sorted(os.listdir(work / "submission"))
    assert files == ["AX.tsv", "CoLA.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "MRPC.tsv",
                     "STS-B.tsv"]
    for name, found in results["tasks"].items():
        task = BENCHMARK[name]
        for split, file in task.submissions.items():
            rows = reading.read_local(task, split, FIXTURES).rows
            written = submission.read(str(work / "submission" / file))
            assert [i for i, _ in written] == [str(r["index"]) for r in rows]
            values = [v for _, v in written]
            expected = _predicted(work, found["best"]["run"], rows, task)
            if task.regression:
                np.testing.assert_allclose([float(v) for v in values], expected, atol=6e-4)
            else:
                assert set(values) <= set(task.labels) and values == expected, file


RTE_FLAGS = ("--tasks", "rte", "--learning-rates", "1e-3,5e-4", "--epochs", "2")


@pytest.fixture(scope="module")
def rte(init, tmp_path_factory):
    """RTE at two rates, straight through: (workdir, results.json without its settings)."""
    work = tmp_path_factory.mktemp("glue_rte") / "straight"
    assert glue(init, work, *RTE_FLAGS) == 0
    results = json.loads((work / "results.json").read_text())
    del results["settings"]
    return work, results


def _results(work):
    results = json.loads((work / "results.json").read_text())
    del results["settings"]
    return results


def test_a_killed_run_resumed_gives_the_same_table(init, rte, tmp_path, monkeypatch):
    """Killed (SIGTERM in the second run's second epoch: a checkpoint is saved) and rerun
    twice: the scores, runs and submission files of a straight run; finished runs are
    skipped."""
    from bert_jax.training import finetune as finetune_module
    from bert_jax.training import loop
    flags = RTE_FLAGS
    started = []
    real_finetune, real_at = finetune_module.finetune, loop.StopRequest.at

    def counting(cfg, workdir):
        started.append(workdir)
        return real_finetune(cfg, workdir)

    def at(self, step):  # the signal arrives after step 4 of the second run (3 steps an epoch)
        return signal.SIGTERM if len(started) == 2 and step == 4 else real_at(self, step)

    monkeypatch.setattr(finetune_module, "finetune", counting)
    monkeypatch.setattr(loop.StopRequest, "at", at)
    assert glue(init, tmp_path / "killed", *flags) == 128 + signal.SIGTERM
    assert not (tmp_path / "killed" / "results.json").exists()
    assert "4" in os.listdir(tmp_path / "killed" / "runs" / "RTE" / "lr0.0005-seed0" /
                             "checkpoints")
    monkeypatch.setattr(loop.StopRequest, "at", real_at)
    for _ in range(2):  # resumes the killed run; then every run is finished
        assert glue(init, tmp_path / "killed", *flags) == 0
    assert len(started) == 3  # run 1 once, run 2 killed and resumed; the last rerun trains none
    work, straight = rte
    assert _results(tmp_path / "killed") == straight
    runs = straight["tasks"]["RTE"]["runs"]
    assert [r["learning_rate"] for r in runs] == [1e-3, 5e-4]
    assert straight["tasks"]["RTE"]["best"] == max(runs, key=lambda r: r["score"])
    for name in ("RTE.tsv",):
        assert (tmp_path / "killed" / "submission" / name).read_text() == \
            (work / "submission" / name).read_text()


def test_the_hub_layout_gives_the_same_table(init, rte, tmp_path):
    """The same data from a folder in nyu-mll/glue's layout (test labels -1): the same runs,
    scores and submission file as from the download's layout."""
    from test_glue_data import _hub_mirror
    hub = _hub_mirror(tmp_path / "hub")
    flags = [f for f in FLAGS if f not in ("--data-dir", FIXTURES)]
    assert cli.main(["glue", "--init", init, "--workdir", str(tmp_path / "w"), *flags,
                     "--hub-dataset", hub, *RTE_FLAGS]) == 0
    work, straight = rte
    assert _results(tmp_path / "w") == straight
    assert (tmp_path / "w" / "submission" / "RTE.tsv").read_text() == \
        (work / "submission" / "RTE.tsv").read_text()


def test_a_rerun_with_other_settings_is_refused(init, run, capsys):
    work, _ = run
    assert glue(init, work, "--tasks", "cola", "--epochs", "2") == 2
    assert capsys.readouterr().err.strip() == (
        f"bert-jax glue: error: {work}: holds GLUE runs with epochs 1; this is epochs 2; use a "
        f"new workdir")


def test_settings_saved_before_init_was_renamed_are_read_as_init_from(tmp_path):
    """A glue_settings.json that says "init" (saved before the rename): a rerun with the same
    model goes on and saves the new name; one with another model is still refused."""
    from bert_jax.errors import BertJaxError
    from bert_jax.glue.job import GlueSettings, _check_workdir
    old = {"init": "m", "epochs": 3, "batch_size": 32, "max_seq_length": 128}
    path = tmp_path / "glue_settings.json"
    path.write_text(json.dumps(old))
    _check_workdir(GlueSettings(init_from="m"), str(tmp_path))
    assert json.loads(path.read_text()) == {"init_from": "m", "epochs": 3, "batch_size": 32,
                                            "max_seq_length": 128}
    path.write_text(json.dumps(old))
    with pytest.raises(BertJaxError, match=r": holds GLUE runs with init_from m; this is "
                                           r"init_from other; use a new workdir$"):
        _check_workdir(GlueSettings(init_from="other"), str(tmp_path))
    assert json.loads(path.read_text()) == old


def test_unknown_task_is_one_line(init, tmp_path, capsys):
    assert glue(init, tmp_path / "w", "--tasks", "rte,squad") == 2
    assert capsys.readouterr().err.strip() == (
        "bert-jax glue: error: --tasks: unknown GLUE task 'squad'; expected some of "
        + ", ".join(benchmark.BENCHMARK) + "")
    assert not (tmp_path / "w").exists()


def test_each_runs_export_has_a_model_card_with_its_official_scores(run, monkeypatch):
    from huggingface_hub import ModelCard
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work, results = run
    for name, found in results["tasks"].items():
        best = found["best"]
        card = ModelCard.load(str(work / best["run"] / "export" / "README.md"))
        values = {r.metric_type: r.metric_value for r in card.data.eval_results}
        assert values == best["scores"], name
        assert {r.dataset_config for r in card.data.eval_results} == {name}
