"""bench/pretraining_pays.py: the random arm is transformers' own BERT init at the export's shape
and vocabulary; the splits are fixed, disjoint and nested; a rate is picked on dev, never on
the test file; the paired difference is the paired t-test's."""

import csv
import math
import os

import pytest
from conftest import ROOT, bench_module, make_hf_model

pays = bench_module("pretraining_pays")


def test_random_arm_is_transformers_init_at_the_exports_shape_and_vocabulary(tmp_path):
    import torch
    import transformers
    export = tmp_path / "export"
    make_hf_model(export, vocab_size=97, hidden_size=32)
    (export / "vocab.txt").write_text("\n".join(f"w{i}" for i in range(97)), encoding="utf-8")
    out = pays.random_model(str(export), 3, str(tmp_path / "random-3"))
    got = transformers.BertForPreTraining.from_pretrained(out)
    config = transformers.BertConfig.from_json_file(str(export / "config.json"))
    torch.manual_seed(3)
    want = transformers.BertForPreTraining(config)
    assert got.config.to_diff_dict() == want.config.to_diff_dict()
    assert (export / "vocab.txt").read_bytes() == open(os.path.join(out, "vocab.txt"), "rb").read()
    got_state, want_state = got.state_dict(), want.state_dict()
    assert got_state.keys() == want_state.keys()
    for name, tensor in want_state.items():
        assert torch.equal(got_state[name], tensor), name
    # not the export's weights, and another seed is another draw
    exported = transformers.BertForPreTraining.from_pretrained(str(export)).state_dict()
    name = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(got_state[name], exported[name])
    other = transformers.BertForPreTraining.from_pretrained(
        pays.random_model(str(export), 4, str(tmp_path / "random-4"))).state_dict()
    assert not torch.equal(other[name], got_state[name])
    assert abs(float(got_state[name].std()) - config.initializer_range) < 0.005


def test_fine_foods_splits_are_fixed_disjoint_and_nested(tmp_path):
    def rows(path):
        with open(path, encoding="utf-8", newline="") as f:
            return [(r["text"], r["label"]) for r in csv.DictReader(f)]
    small = pays.fine_foods_split(str(tmp_path), 250)
    large = pays.fine_foods_split(str(tmp_path / "again"), 3000)
    train_small, train_large = rows(small["train"]), rows(large["train"])
    dev = rows(small["validation"])
    assert len(train_small) == 250 and len(train_large) == 3000 and len(dev) == 1000
    assert dev == rows(large["validation"])  # the dev split does not move with the label count
    assert train_small == train_large[:250]  # nested
    everything = rows(os.path.join(ROOT, "data", "fine_foods", "train.csv"))
    assert sorted(train_large + dev) == sorted(everything)  # disjoint, and all 4,000 used
    assert small["test"].endswith(os.path.join("fine_foods", "test.csv"))
    assert {label for _, label in train_small} == {"great", "other"}
    with pytest.raises(SystemExit, match="fine_foods:3001: expected 1 to 3000"):
        pays.fine_foods_split(str(tmp_path), 3001)


def _row(arm, rate, seed, dev, test, task="fine_foods", labels=250, recipe="default"):
    key = pays.HEADLINE[task]
    return {"recipe": recipe, "task": task, "labels": labels, "arm": arm, "rate": rate,
            "seed": seed, "dev": {key: dev}, "test": {key: test}}


def test_rate_is_picked_on_dev_over_the_seeds_every_rate_ran():
    rows = [_row("random", 1e-4, s, dev=0.5, test=0.9) for s in range(3)]  # best on test
    rows += [_row("random", 1e-3, s, dev=0.6, test=0.1) for s in range(3)]  # best on dev
    rows += [_row("random", 3e-4, 0, dev=0.99, test=0.5)]  # best on seed 0, the one all ran
    assert pays.pick_rate(rows, "mcc") == (3e-4, [0])
    rows += [_row("random", 3e-4, 1, dev=0.0, test=0.5)]
    rate, seeds = pays.pick_rate(rows, "mcc")
    assert seeds == [0, 1] and rate == 1e-3  # means over seeds 0, 1: 0.5, 0.6, 0.495


def test_paired_difference_and_p_over_the_common_seeds():
    from scipy import stats
    pre = [0.40, 0.42, 0.45, 0.41, 0.44]
    ran = [0.30, 0.35, 0.33, 0.36, 0.31]
    rows = [_row("pretrained", 3e-4, s, dev=0.5, test=v) for s, v in enumerate(pre)]
    rows += [_row("random", 1e-3, s, dev=0.5, test=v) for s, v in enumerate(ran)]
    rows += [_row("random", 1e-3, 9, dev=0.5, test=0.0)]  # unpaired: not in the difference
    cell = pays.summarise(rows)["default"]["fine_foods-250"]
    d = cell["pretrained - random"]
    assert d["seeds"] == [0, 1, 2, 3, 4] and d["wins"] == 5
    assert math.isclose(d["mean"], sum(a - b for a, b in zip(pre, ran)) / 5)
    assert math.isclose(d["paired_p"], stats.ttest_rel(pre, ran).pvalue)
    assert cell["random"]["seeds"] == [0, 1, 2, 3, 4, 9]
    assert math.isclose(cell["pretrained"]["test_mean"], sum(pre) / 5)
    assert "| fine_foods (mcc ×100) | 250 | 42.4 ± 2.1 (0.0003) |" in pays.table(pays.summarise(rows))


def test_each_arm_picks_its_options_and_rate_on_dev_among_one_workdirs_recipes():
    from scipy import stats

    def rows(recipe, arm, rate, dev, tests, workdir="runs/default"):
        return [{**_row(arm, rate, s, dev=dev, test=t, recipe=recipe), "pretrained": workdir,
                 "options": [recipe]} for s, t in enumerate(tests)]
    pre = [0.40, 0.42, 0.45, 0.41, 0.44]
    ran = [0.30, 0.35, 0.33, 0.36, 0.31]
    data = (rows("plain", "pretrained", 1e-3, 0.2, [0.9] * 5)  # best on test, not on dev
            + rows("llrd", "pretrained", 3e-3, 0.5, pre + [0.43])  # seed 5 too: paired on 0-4
            + rows("llrd", "random", 1e-3, 0.1, [0.0] * 5)  # the decay slows random weights
            + rows("plain", "random", 3e-4, 0.4, ran)
            + rows("plain", "random", 1e-3, 0.9, [0.5] * 4)  # four seeds: not a candidate
            + rows("long", "random", 1e-3, 0.9, [0.5] * 5, workdir="runs/long"))
    best = pays.best_options(data)
    cell = best["runs/default"]["fine_foods-250"]
    assert (cell["pretrained"]["recipe"], cell["pretrained"]["rate"]) == ("llrd", 3e-3)
    assert (cell["random"]["recipe"], cell["random"]["rate"]) == ("plain", 3e-4)
    assert cell["random"]["candidates"] == 2 and cell["random"]["picked_over"] == [0, 1, 2, 3, 4]
    assert cell["pretrained"]["seeds"] == [0, 1, 2, 3, 4, 5]
    assert math.isclose(cell["pretrained"]["test_mean"], sum(pre + [0.43]) / 6)
    d = cell["pretrained - random"]
    assert d["seeds"] == [0, 1, 2, 3, 4] and d["wins"] == 5
    assert math.isclose(d["mean"], sum(a - b for a, b in zip(pre, ran)) / 5)
    assert math.isclose(d["paired_p"], stats.ttest_rel(pre, ran).pvalue)
    assert "pretrained - random" not in best["runs/long"]["fine_foods-250"]  # one arm only
    assert ("| runs/default | fine_foods (mcc ×100) | 250 | 42.5 ± 1.9: llrd, 0.003 | "
            "33.0 ± 2.5: plain, 0.0003 | +9.4 ± 3.4 (p 0.003, 5/5) |") in pays.best_table(best)


def test_recipes_that_differ_in_pretraining_seed_are_pooled_seed_by_seed():
    from scipy import stats
    assert pays.recipe_family("default-s1+qk1+emb") == ("default+qk1+emb", 1)
    assert pays.recipe_family("default+qk1+emb") == ("default+qk1+emb", 0)
    assert pays.recipe_family("long16k-s12") == ("long16k", 12)
    assert pays.recipe_family("default+sop-s1") == ("default+sop-s1", 0)  # a tag after options
    pre0, pre1 = [0.40, 0.42, 0.45, 0.41, 0.44], [0.30, 0.36, 0.31, 0.33, 0.35, 0.9]
    ran0, ran1 = [0.30, 0.35, 0.33, 0.36, 0.31], [0.31, 0.35, 0.33, 0.36, 0.30]
    rows = [_row("pretrained", 1e-3, s, dev=0.5, test=v, recipe="d+o")
            for s, v in enumerate(pre0)]
    rows += [_row("random", 1e-3, s, dev=0.5, test=v, recipe="d+o") for s, v in enumerate(ran0)]
    rows += [_row("pretrained", 3e-3, s, dev=0.5, test=v, recipe="d-s1+o")  # seed 5: unpaired
             for s, v in enumerate(pre1)]
    rows += [_row("random", 1e-3, s, dev=0.5, test=v, recipe="d-s1+o")
             for s, v in enumerate(ran1)]
    rows += [_row("pretrained", 1e-3, 0, dev=0.5, test=0.5, recipe="d-s1+o", labels=1000)]
    pooled = pays.pretraining_seeds(pays.summarise(rows))
    assert list(pooled) == ["d+o"] and list(pooled["d+o"]) == ["fine_foods-250"]  # 1,000: one
    cell = pooled["d+o"]["fine_foods-250"]
    assert sorted(cell["exports"]) == [0, 1]
    assert math.isclose(cell["exports"][1]["pretrained - random"]["mean"],
                        sum(a - b for a, b in zip(pre1, ran1)) / 5)
    mean_pre = [(a + b) / 2 for a, b in zip(pre0, pre1)]
    mean_ran = [(a + b) / 2 for a, b in zip(ran0, ran1)]
    d = cell["mean over exports"]
    assert d["seeds"] == [0, 1, 2, 3, 4]
    assert math.isclose(d["mean"], sum(a - b for a, b in zip(mean_pre, mean_ran)) / 5)
    assert math.isclose(d["paired_p"], stats.ttest_rel(mean_pre, mean_ran).pvalue)
    assert ("| d+o | fine_foods (mcc ×100) | 250 | seed 0: 42.4, +9.4 ± 3.4 (p 0.003, 5/5); "
            "seed 1: 42.5, +0.0 ± 3.2 (p 1.000, 2/5) | +4.7 ± 2.9 (p 0.021, 5/5) | 6.6: 41 / 16 |"
            ) in pays.seeds_table(pooled)  # seed 1's 42.5: its row's mean, seed 5 too
    between = cell["between exports"]
    assert math.isclose(between["sd"], abs(cell["exports"][0]["pretrained - random"]["mean"]
                                           - cell["exports"][1]["pretrained - random"]["mean"])
                        / math.sqrt(2))
    assert between["exports for +3"] == pays.exports_needed(between["sd"], 0.03)


def test_exports_needed_is_the_one_sample_t_tests_power():
    import numpy as np
    from scipy import stats

    def simulated_power(n, d, draws=20_000):  # n exports' differences, true mean d, sd 1
        x = np.random.default_rng(0).normal(d, 1.0, size=(draws, n))
        return float(np.mean(stats.ttest_1samp(x, 0.0, axis=1).pvalue < 0.05))
    assert pays.exports_needed(1.0, 0.5) == 34  # Cohen's d = 0.5: 34 (power tables, G*Power)
    assert pays.exports_needed(3.9, 3) == 16 and pays.exports_needed(3.9, 5) == 7
    assert pays.exports_needed(0.0036, 0.03) == 3  # d = 8: scipy's lower tail is nan there
    n = pays.exports_needed(2.3, 1)
    assert simulated_power(n, 1 / 2.3) > 0.78 and simulated_power(n - 2, 1 / 2.3) < 0.8
    assert pays.exports_needed(0.0, 3) is None and pays.exports_needed(math.nan, 3) is None
    assert pays.exports_needed(100.0, 1, most=50) is None


def test_frequent_tag_baseline_on_a_small_conll_file(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("The DT B-NP O\ndog NN I-NP O\nruns VBZ B-VP O\n\n"
                     "the DT B-NP O\nruns NNS I-NP O\nruns VBZ B-VP O\n\n", encoding="utf-8")
    test = tmp_path / "test.txt"
    test.write_text("THE DT B-NP O\nruns VBZ B-VP O\ncat NN I-NP O\n\n", encoding="utf-8")
    base = pays.frequent_tag_baseline({"train": str(train), "test": str(test)})
    # the → DT, runs → VBZ (2 of 3), cat unseen → the commonest tag (DT, VBZ tie: DT first)
    assert base["test"] == pytest.approx(2 / 3)


def test_results_of_another_export_are_refused(tmp_path):
    export = tmp_path / "run" / "export"
    make_hf_model(export, vocab_size=97, hidden_size=32)
    fingerprint = pays.export_fingerprint(str(tmp_path / "run"))
    import hashlib
    want = hashlib.sha256((export / "config.json").read_bytes()
                          + (export / "model.safetensors").read_bytes()).hexdigest()
    assert fingerprint == want
    result = tmp_path / "lr0.001-seed0.json"
    result.write_text('{"export_sha256": "%s"}' % fingerprint, encoding="utf-8")
    pays._check_export(str(result), fingerprint)  # the same export: joins
    result.write_text('{}', encoding="utf-8")
    pays._check_export(str(result), fingerprint)  # written before fingerprints: joins
    result.write_text('{"export_sha256": "%s"}' % ("0" * 64), encoding="utf-8")
    with pytest.raises(SystemExit, match="came from an export with sha256 000000000000"):
        pays._check_export(str(result), fingerprint)


def test_exports_of_one_shape_and_vocabulary_share_the_random_arms_runs(tmp_path, monkeypatch):
    import argparse
    import json
    ran = []

    def finetune_once(init, overrides, workdir):
        ran.append((init, overrides))
        return {"dev": {"mcc": 0.1 * len(ran)}, "best_epoch": 3, "test": {"mcc": 0.2},
                "dev_by_epoch": [0.1], "wall_s": 9.0}

    monkeypatch.setattr(pays, "finetune_once", finetune_once)
    monkeypatch.setattr(pays, "task_files", lambda *a: {"train": "t", "validation": "v",
                                                        "test": "x"})
    for run, seed, vocab in (("s0", 0, "a"), ("s1", 1, "a"), ("other", 2, "b")):
        export = tmp_path / run / "export"  # other weights (pretraining seeds), one shape
        make_hf_model(export, seed=seed, vocab_size=97, hidden_size=32)
        (export / "vocab.txt").write_text("\n".join(f"{vocab}{i}" for i in range(97)),
                                          encoding="utf-8")

    def protocol(recipe, run=None, options=()):
        args = argparse.Namespace(
            recipe=[(recipe, str(tmp_path / (run or recipe)))], tasks=[("fine_foods", 250)],
            seeds=[0], arms=["random"], rates=[1e-3], epochs=20, redraw="",
            results=str(tmp_path / "pays"), work=str(tmp_path / "work"), data="")
        pays.run_protocol(args, list(options))

    def record(recipe):
        path = pays.result_path(str(tmp_path / "pays"), recipe, "fine_foods", 250, "random",
                                1e-3, 0)
        return json.loads(open(path, encoding="utf-8").read())

    protocol("s0")
    protocol("s1")  # the same random model: its run is s0's, not run again
    assert len(ran) == 1
    first, second = record("s0"), record("s1")
    assert second["random_from"] == "s0/fine_foods-250/random/lr0.001-seed0.json"
    assert "random_from" not in first
    assert second["random_sha256"] == first["random_sha256"]
    assert second["export_sha256"] != first["export_sha256"]
    for key in pays.SCORES:
        assert second[key] == first[key]
    protocol("other")  # another vocabulary: another random model, run
    assert len(ran) == 2 and "random_from" not in record("other")
    assert record("other")["random_sha256"] != first["random_sha256"]
    protocol("s1+llrd", "s1", options=["layer_lr_decay=0.5"])  # other options: run
    assert len(ran) == 3 and "random_from" not in record("s1+llrd")
    protocol("s0+llrd", "s0", options=["layer_lr_decay=0.5"])  # ... shared with those
    assert len(ran) == 3
    assert record("s0+llrd")["random_from"] == "s1+llrd/fine_foods-250/random/lr0.001-seed0.json"
