"""bench/time_to_accuracy.py end to end at a budget of seconds: both curves exist, both
frameworks evaluated the very same held-out masks, and they start from the same weights (the
same held-out loss at step 0)."""

import json
import os

import jax
import pytest
from conftest import ROOT, bench_module


@pytest.mark.slow  # two worker processes, ours and transformers'
def test_harness_runs_both_frameworks_on_identical_heldout_masks(pretrain_setup, tmp_path,
                                                                 monkeypatch, capfd):
    """The harness's own main() here; it runs each framework in a worker process of its own."""
    base, overrides = pretrain_setup
    keep = [o for o in overrides if "eval_every" not in o and "log_every" not in o]
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    # 4 steps a framework, whatever the machine's speed (a clock of seconds gave a cold compile on
    # a loaded 2-core machine one step); the minutes only bound a hung run
    minutes = 3.0
    tta = bench_module("time_to_accuracy")
    code = tta.main(["--minutes", str(minutes), "--eval-every", "1000", "--out", str(tmp_path),
                     "--label", "smoke", *keep, "--config.steps=4", "--config.eval_batches=0"])
    assert code == 0, capfd.readouterr().err[-3000:]
    result = json.load(open(tmp_path / "smoke.json"))
    ours, hf = result["curves"]
    assert (ours["framework"], hf["framework"]) == ("ours", "hf")
    for curve in (ours, hf):
        assert len(curve["points"]) == 2 and curve["steps"] == 4  # evaluated at 0 and the end
        assert curve["points"][-1]["step"] == curve["steps"]
        minutes_at = [p["minutes"] for p in curve["points"]]
        assert minutes_at == sorted(minutes_at) and minutes_at[-1] <= minutes + 0.5
    # the same held-out arrays (ids, masks, positions, labels, weights) on both sides
    assert ours["heldout_digest"] == hf["heldout_digest"] == ours["setup_digest"]
    # the same initial weights and masks: the same held-out loss before any step
    first_ours, first_hf = ours["points"][0], hf["points"][0]
    assert first_ours["step"] == first_hf["step"] == 0
    assert abs(first_ours["mlm_loss"] - first_hf["mlm_loss"]) < 1e-4
    assert abs(first_ours["nsp_loss"] - first_hf["nsp_loss"]) < 1e-4
    assert os.path.getsize(tmp_path / "smoke.png") > 10_000
    assert "| ours smoke |" in open(tmp_path / "smoke.md").read()
    env = json.load(open(tmp_path / "smoke.env.json"))  # the figure's machine, beside it
    assert env["versions"]["jax"] and env["cpu"]["cores"] == os.cpu_count()


def test_table_reports_accuracy_at_marks_and_minutes_to_the_reference():
    tta = bench_module("time_to_accuracy")
    line = lambda acc: [{"minutes": m, "mlm_accuracy": a, "mlm_loss": 1.0, "step": i}  # noqa
                        for i, (m, a) in enumerate(acc)]
    ours = {"label": "ours", "framework": "ours", "steps": 9, "seconds": 900,
            "points": line([(0, 0.0), (5, 0.2), (10, 0.3), (15, 0.35)])}
    hf = {"label": "hf", "framework": "hf", "steps": 3, "seconds": 900,
          "points": line([(0, 0.0), (5, 0.1), (10, 0.15), (15, 0.2)])}
    assert tta.at_minutes(ours["points"], 2) == 0.2 * 2 / 5
    assert tta.minutes_to(ours["points"], 0.2) == 5
    assert tta.minutes_to(ours["points"], 0.25) == 7.5
    assert tta.minutes_to(hf["points"], 0.5) is None
    text = tta.table([ours, hf])
    assert "| ours | 0.080 | 0.200 | 0.300 |" in text and "min to 0.200 (hf)" in text
    assert text.splitlines()[2].endswith("| 5.0 |")
    text = tta.table([ours, hf], target=0.2)  # minutes to 0.2: ours 5, theirs 15
    assert "| min to 0.200 (hf) | min to 0.200 |" in text
    assert text.splitlines()[2].endswith("| 5.0 | 5.0 |")
    assert text.splitlines()[3].endswith("| 15.0 | 15.0 |")
    assert text.splitlines()[-1] == "ours: 0.33× hf's minutes to 0.200"
    assert "—" in tta.table([ours, hf], target=0.5).splitlines()[2]  # not reached


def test_the_benchmark_steps_the_jobs_own_step(pretrain_setup, tmp_path):
    """OursTrainer is built by the job's builder (training/pretrain_parts.build): its losses on
    the first three batches are the job's (metrics.jsonl), with whole-word masking and two
    micro-batches on — the third step's loss is after the first update at a nonzero rate."""
    from conftest import CONFIG, train_here

    from bert_jax.training import losses
    base, overrides = pretrain_setup
    extra = ["--config.steps=3", "--config.whole_word_masking=true",
             "--config.grad_accum_steps=2"]
    assert train_here(tmp_path / "job", [*overrides, *extra]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "job" / "metrics.jsonl")]
    job = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in job] == [1, 2, 3] and job[1]["learning_rate"] > 0

    tta = bench_module("time_to_accuracy")
    cfg = tta.load_config(CONFIG, [o.removeprefix("--config.") for o in [*overrides, *extra]])
    s = tta.setup(cfg, str(tmp_path / "bench"))
    trainer = tta.OursTrainer(s)
    for step in range(3):
        batch = trainer.prepare(step, s.parts.train_batch(step, cfg.max_seq_length))
        trainer.step(step, batch, 1.0)
        ours = losses.total_loss(losses.means(jax.device_get(trainer.pending)))
        for name in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy"):
            assert abs(ours[name] - job[step][name]) <= 1e-6, (step, name, ours[name],
                                                                job[step][name])
    # its state replicated as the job's: the step compiled once, not again for its own output
    assert trainer.step_fn._cache_size() == 1
