"""GLUE data: the fixtures in the original download's layout (tests/fixtures/glue) read with
their quirks, a hub mirror in nyu-mll/glue's layout read to the same rows, the official scores
equal to scikit-learn's and scipy's, and the submission files in the server's format."""

import os
import pathlib

import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.glue import benchmark, reading, scores, submission
from bert_jax.glue.benchmark import BENCHMARK

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "glue")
SIZES = {"train": 24, "validation": 12, "validation_mismatched": 12, "test": 8,
         "test_mismatched": 8, "diagnostic": 6}


@pytest.mark.parametrize("name", list(BENCHMARK))
def test_every_split_of_the_download_layout_is_read(name):
    task = BENCHMARK[name]
    for split, spec in task.splits.items():
        rows = reading.read_local(task, split, FIXTURES)
        assert len(rows.rows) == SIZES[split] and rows.where.endswith(spec.file)
        assert rows.skipped == (1 if (name, split) == ("QQP", "train") else 0)
        for i, row in enumerate(rows.rows):
            assert set(row) == {"index", "sentence1"} | ({"sentence2"} if task.pair else set()) \
                | ({"label"} if spec.labelled else set())
            assert " the " in f" {row['sentence1']} " and "\t" not in row["sentence1"]
            assert row["index"] == i
            if spec.labelled and task.regression:
                assert isinstance(row["label"], float) and 0 <= row["label"] <= 5
            elif spec.labelled:
                assert row["label"] in task.labels


def test_the_quirks_of_the_layout():
    cola = reading.read_local(BENCHMARK["CoLA"], "train", FIXTURES).rows
    first = pathlib.Path(FIXTURES, "CoLA", "train.tsv").read_text().split("\n")[0]
    assert first.split("\t")[3] == cola[0]["sentence1"] and first.split("\t")[1] == \
        cola[0]["label"]  # no header: the sentence is the 4th field, the label the 2nd
    assert pathlib.Path(FIXTURES, "MRPC", "dev.tsv").read_bytes()[:3] == b"\xef\xbb\xbf"
    assert reading.read_local(BENCHMARK["MRPC"], "validation", FIXTURES).rows[0]["label"] in \
        ("0", "1")
    test = reading.read_local(BENCHMARK["CoLA"], "test", FIXTURES).rows  # stray quotes kept
    assert test[0]["sentence1"].endswith('"quoted .')
    mnli = reading.read_local(BENCHMARK["MNLI"], "validation_mismatched", FIXTURES).rows
    assert {r["label"] for r in mnli} <= set(benchmark.NLI3)


def _hub_mirror(root):
    """The fixtures as a folder in nyu-mll/glue's layout: <config>/<split>-00000-of-00001.parquet
    with ClassLabel labels (-1 in test splits) and `idx`, configurations in README.md."""
    import datasets
    configs = {}
    for task in BENCHMARK.values():
        for split, spec in task.splits.items():
            rows = reading.read_local(task, split, FIXTURES).rows
            text, pair = task.hub_columns
            label = (datasets.Value("float32") if task.regression
                     else datasets.ClassLabel(names=list(task.labels)))
            columns = {text: [r["sentence1"] for r in rows]}
            features = {text: datasets.Value("string")}
            if pair:
                columns[pair] = [r["sentence2"] for r in rows]
                features[pair] = datasets.Value("string")
            if spec.labelled:
                labels = [r["label"] if task.regression else task.labels.index(r["label"])
                          for r in rows]
            else:
                labels = [-1] * len(rows)
            columns["label"], features["label"] = labels, label
            columns["idx"], features["idx"] = [r["index"] for r in rows], datasets.Value("int32")
            table = datasets.Dataset.from_dict(columns, features=datasets.Features(features))
            os.makedirs(root / spec.hub_config, exist_ok=True)
            table.to_parquet(str(root / spec.hub_config / f"{spec.hub_split}-00000-of-00001."
                                                          f"parquet"))
            configs.setdefault(spec.hub_config, []).append(spec.hub_split)
    yaml = "".join(f"- config_name: {c}\n  data_files:\n" + "".join(
        f"  - split: {s}\n    path: {c}/{s}-*\n" for s in splits)
        for c, splits in configs.items())
    (root / "README.md").write_text(f"---\nconfigs:\n{yaml}---\n")
    return str(root)


def test_the_hub_layout_reads_to_the_same_rows(tmp_path):
    hub = _hub_mirror(tmp_path / "glue")
    for task in BENCHMARK.values():
        for split in task.splits:
            local = reading.read_local(task, split, FIXTURES).rows
            online = reading.read_hub(task, split, hub)
            if task.regression and task.splits[split].labelled:  # float32 on the hub
                assert [r.pop("label") for r in online.rows] == pytest.approx(
                    [r.pop("label") for r in local], abs=1e-6)
            assert online.rows == local, (task.name, split)


def test_scores_equal_scikit_learn_and_scipy_on_random_cases():
    from scipy import stats
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    for seed in range(50):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 30))
        for task in BENCHMARK.values():
            if task.regression:
                labels = rng.uniform(0, 5, n)
                predictions = labels + rng.normal(size=n)
                got = scores.split_scores(task, predictions, labels)
                assert got["pearson"] == pytest.approx(stats.pearsonr(predictions, labels)[0])
                assert got["spearman"] == pytest.approx(
                    stats.spearmanr(predictions, labels)[0])
                continue
            truth = rng.integers(0, len(task.labels), n)
            guess = np.where(rng.random(n) < 0.6, truth, rng.integers(0, len(task.labels), n))
            got = scores.split_scores(task, [task.labels[i] for i in guess],
                                      [task.labels[i] for i in truth])
            if task.name == "CoLA":
                assert got == {"mcc": pytest.approx(matthews_corrcoef(truth, guess), abs=1e-12)}
            elif "f1" in task.metrics:
                assert got == {"f1": pytest.approx(f1_score(truth, guess, zero_division=0)),
                               "accuracy": pytest.approx(accuracy_score(truth, guess))}
            else:
                assert got == {"accuracy": pytest.approx(accuracy_score(truth, guess))}


def test_glue_average_counts_a_two_score_task_once():
    chosen = [BENCHMARK["MRPC"], BENCHMARK["RTE"], BENCHMARK["MNLI"]]
    found = [{"f1": 0.9, "accuracy": 0.8}, {"accuracy": 0.6},
             {"matched_accuracy": 0.8, "mismatched_accuracy": 0.7}]
    assert scores.glue_average(chosen, found) == pytest.approx((0.85 + 0.6 + 0.75) / 3)


def test_submission_files_are_in_the_server_format(tmp_path):
    path = tmp_path / "submission" / "STS-B.tsv"
    submission.write(str(path), [0, 1, 2], [np.float32(4.25), 0.5, 3.0])
    assert path.read_text() == "index\tprediction\n0\t4.250\n1\t0.500\n2\t3.000\n"
    submission.write(str(tmp_path / "MNLI-m.tsv"), [5, 6], ["entailment", "neutral"])
    assert submission.read(str(tmp_path / "MNLI-m.tsv")) == [("5", "entailment"),
                                                             ("6", "neutral")]


def test_select_reads_any_case_and_refuses_an_unknown_task():
    assert [t.name for t in benchmark.select("rte,sst2, MNLI")] == ["SST-2", "MNLI", "RTE"]
    assert len(benchmark.select("")) == 9
    with pytest.raises(BertJaxError, match=r"^tasks: unknown GLUE task 'squad'; expected some "
                                           r"of CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, "
                                           r"WNLI$"):
        benchmark.select("rte,squad")


def _copy(tmp_path, task="RTE"):
    import shutil
    shutil.copytree(os.path.join(FIXTURES, task), tmp_path / task)
    return tmp_path / task


def test_bad_layouts_name_the_file_line_and_column(tmp_path):
    rte = _copy(tmp_path)
    os.remove(rte / "dev.tsv")
    with pytest.raises(BertJaxError, match=rf"^{rte}: no dev.tsv \(the RTE folder of the GLUE "
                                           r"layout has train.tsv, dev.tsv, test.tsv\)$"):
        reading.read_local(BENCHMARK["RTE"], "validation", str(tmp_path))
    with pytest.raises(BertJaxError, match=rf"^{tmp_path / 'WNLI'}: no such folder"):
        reading.read_local(BENCHMARK["WNLI"], "train", str(tmp_path))
    lines = (rte / "train.tsv").read_text().splitlines()
    (rte / "train.tsv").write_text("\n".join(lines[:3] + ["7\tonly two fields"] + lines[3:]))
    with pytest.raises(BertJaxError, match=rf"^{rte / 'train.tsv'}: line 4: 2 tab-separated "
                                           r"fields, expected 4$"):
        reading.read_local(BENCHMARK["RTE"], "train", str(tmp_path))
    (rte / "train.tsv").write_text("\n".join(lines[:2] + ["7\ta .\tb .\tmaybe"]))
    with pytest.raises(BertJaxError, match=rf"^{rte / 'train.tsv'}: line 3: column 'label' is "
                                           r"'maybe'; expected one of entailment, "
                                           r"not_entailment$"):
        reading.read_local(BENCHMARK["RTE"], "train", str(tmp_path))
    sts = _copy(tmp_path, "STS-B")
    lines = (sts / "dev.tsv").read_text().splitlines()
    lines[2] = lines[2].rsplit("\t", 1)[0] + "\thigh"
    (sts / "dev.tsv").write_text("\n".join(lines))
    with pytest.raises(BertJaxError, match=rf"^{sts / 'dev.tsv'}: line 3: column 'score' is "
                                           r"'high'; expected a number \(a similarity score "
                                           r"0-5\)$"):
        reading.read_local(BENCHMARK["STS-B"], "validation", str(tmp_path))
    cola = _copy(tmp_path, "CoLA")
    (cola / "dev.tsv").write_text("gj04\t2\t\ta sentence .\n")
    with pytest.raises(BertJaxError, match=rf"^{cola / 'dev.tsv'}: line 1: column 2 is '2'; "
                                           r"expected one of 0, 1$"):
        reading.read_local(BENCHMARK["CoLA"], "validation", str(tmp_path))
