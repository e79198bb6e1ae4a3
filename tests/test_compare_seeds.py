"""bench/compare_seeds.py's summary: each side's mean ± sd over the seeds it has, and Welch's
t-test of the difference, and the paired difference over the seeds both sides ran, as scipy
computes them; the `normal` arm is read against the own arm's
transformers runs."""

import json
import os
import statistics

import pytest
from conftest import bench_module


def _harness():
    return bench_module("compare_seeds")


def _write(folder, side, seed, scores):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{side}-{seed}.json"), "w", encoding="utf-8") as f:
        json.dump({"side": side, "seed": seed, "scores": scores}, f)


def test_summary_is_mean_sd_and_welch(tmp_path):
    from scipy import stats
    cs = _harness()
    ours = [0.74, 0.73, 0.75, 0.72, 0.76]
    theirs = [0.77, 0.76, 0.775, 0.765, 0.77, 0.78]
    for seed, f1 in enumerate(ours):
        _write(tmp_path / "ner" / "own", "ours", seed, {"f1": f1, "precision": f1, "recall": f1,
                                                        "accuracy": 0.9 + f1 / 10, "strict_f1": f1})
    for seed, f1 in enumerate(theirs):
        _write(tmp_path / "ner" / "own", "hf", seed, {"f1": f1, "precision": f1, "recall": f1,
                                                      "accuracy": 0.9 + f1 / 10, "strict_f1": f1})
    _write(tmp_path / "ner" / "normal", "ours", 0, {"f1": 0.5, "precision": 0.5, "recall": 0.5,
                                                    "accuracy": 0.95, "strict_f1": 0.5})
    _write(tmp_path / "ner" / "normal", "ours", 1, {"f1": 0.6, "precision": 0.6, "recall": 0.6,
                                                    "accuracy": 0.9, "strict_f1": 0.6})
    out = cs.summarise("ner", str(tmp_path))
    w = out["arms"]["own"]["metrics"]["f1"]
    assert w["ours_mean"] == pytest.approx(statistics.mean(ours))
    assert w["ours_sd"] == pytest.approx(statistics.stdev(ours))
    assert w["hf_sd"] == pytest.approx(statistics.stdev(theirs))
    assert (w["n_ours"], w["n_hf"]) == (5, 6)
    ref = stats.ttest_ind(ours, theirs, equal_var=False)
    assert w["t"] == pytest.approx(ref.statistic) and w["p"] == pytest.approx(ref.pvalue)
    assert w["difference"] == pytest.approx(statistics.mean(ours) - statistics.mean(theirs))
    pairs = list(zip(ours, theirs))  # seeds 0-4 on both sides; hf's seed 5 is unpaired
    assert w["paired_n"] == 5
    assert w["paired_mean"] == pytest.approx(statistics.mean(x - y for x, y in pairs))
    assert w["paired_sd"] == pytest.approx(statistics.stdev(x - y for x, y in pairs))
    assert w["paired_p"] == pytest.approx(stats.ttest_rel(ours, theirs[:5]).pvalue)
    normal = out["arms"]["normal"]["metrics"]["f1"]
    assert normal["ours_mean"] == pytest.approx(0.55) and normal["n_hf"] == 6
    assert "shared" not in out["arms"]  # no runs there yet
    table = (tmp_path / "ner" / "summary.md").read_text(encoding="utf-8")
    assert "| own | f1 | 74.00 ± 1.58 (n=5) | 77.00 ± 0.71 (n=6) | -3.00 |" in table
