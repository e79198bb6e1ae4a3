"""A workdir holds one run: a resume that would change what the run computes is refused in one
line and changes nothing; one that only logs, evaluates or checkpoints at other intervals ends
bit-identical to the uninterrupted run; one that raises `steps` trains on and is recorded."""

import json
import os
import shutil

import numpy as np
import pytest

from bert_jax import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "pretrain_tiny.py")


def pretrain(workdir, overrides, *extra) -> int:
    return cli.main(["pretrain", "--config", CONFIG, "--workdir", str(workdir), *overrides,
                     "--config.steps=8", "--config.checkpoint_every=4", *extra])


def snapshot(root) -> dict:
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                out[os.path.relpath(os.path.join(directory, name), root)] = f.read()
    return out


def params_of(workdir):
    from flax import traverse_util

    from bert_jax.model_files import model_dir
    return traverse_util.flatten_dict(model_dir.load_pretrained(str(workdir))[1])


@pytest.fixture(scope="module")
def reference(pretrain_setup, tmp_path_factory):
    """An uninterrupted 8-step run, checkpointed at 4 and 8, started as the default recipe
    starts (sinusoidal positions at 4×, mimetic attention)."""
    monkeypatch = pytest.MonkeyPatch()
    base = tmp_path_factory.mktemp("resume_rules")
    monkeypatch.chdir(base)  # the prepared-data cache and XLA's land here, not in the checkout
    _, overrides = pretrain_setup
    overrides = [*overrides, "--config.position_init=sinusoidal", "--config.position_scale=4",
                 "--config.mimetic_qk=0.12"]
    assert pretrain(base / "ref", overrides) == 0
    yield base, overrides
    monkeypatch.undo()


def test_a_resume_with_other_intervals_is_bit_identical(reference, tmp_path, monkeypatch, caplog):
    base, overrides = reference
    monkeypatch.chdir(base)
    work = tmp_path / "resumed"
    shutil.copytree(base / "ref", work)
    shutil.rmtree(work / "checkpoints" / "8")  # as a kill after the checkpoint of step 4 leaves it
    assert pretrain(work, overrides, "--config.log_every=3", "--config.eval_every=5") == 0
    ref, resumed = params_of(base / "ref"), params_of(work)
    assert ref.keys() == resumed.keys()
    assert all(np.array_equal(ref[k], resumed[k]) for k in ref)
    saved = json.load(open(work / "train_config.json"))
    assert (saved["log_every"], saved["eval_every"]) == (3, 5)
    assert saved["resumes"][0]["step"] == 4
    assert saved["resumes"][0]["changed"] == {"log_every": [1, 3], "eval_every": [0, 5]}
    assert "resuming from step 4 with config.log_every 1 → 3, config.eval_every 0 → 5" in \
        caplog.text


def test_a_fresh_run_of_the_same_recipe_is_bit_identical(reference, tmp_path, monkeypatch):
    """Step-based, the default recipe's start: the same vocabulary, losses and weights."""
    from bert_jax.runtime.metric_writer import read_metrics
    base, overrides = reference
    monkeypatch.chdir(base)
    assert pretrain(tmp_path / "again", overrides) == 0
    ref, again = params_of(base / "ref"), params_of(tmp_path / "again")
    assert all(np.array_equal(ref[k], again[k]) for k in ref)
    losses = lambda w: [r["loss"] for r in read_metrics(str(w)) if r["split"] == "train"]  # noqa
    assert len(losses(base / "ref")) == 8 and losses(tmp_path / "again") == losses(base / "ref")
    assert open(base / "ref" / "vocab" / "vocab.txt").read() == \
        open(tmp_path / "again" / "vocab" / "vocab.txt").read()


def test_a_resume_with_more_steps_trains_on_and_records_both(reference, tmp_path, monkeypatch):
    from bert_jax.model_files import paths
    base, overrides = reference
    monkeypatch.chdir(base)
    work = tmp_path / "longer"
    shutil.copytree(base / "ref", work)
    assert pretrain(work, overrides, "--config.steps=10") == 0
    assert paths.latest_checkpoint_step(str(work)) == 10
    saved = json.load(open(work / "train_config.json"))
    assert saved["steps"] == 10 and saved["resumes"][-1]["changed"] == {"steps": [8, 10]}
    assert set(saved["inputs"]) == {"the model", "the vocabulary",
                                    "the training data of 32 tokens"}


@pytest.mark.parametrize("change,shown", [
    (("--config.learning_rate=0.01",), "--config.learning_rate: 0.002 there, 0.01 here"),
    (("--config.seed=3",), "--config.seed: 0 there, 3 here"),
    (("--config.data_seed=2", "--config.masked_lm_prob=0.2"),
     "--config.masked_lm_prob: 0.15 there, 0.2 here; --config.data_seed: 0 there, 2 here"),
])
def test_a_resume_that_changes_the_run_is_refused_and_changes_nothing(
        reference, change, shown, tmp_path, monkeypatch, capfd):
    base, overrides = reference
    monkeypatch.chdir(base)
    before = snapshot(base / "ref")
    assert pretrain(base / "ref", overrides, *change) == 2
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert err == [f"bert-jax pretrain: error: {base / 'ref'}: holds a run with other settings "
                   f"({shown}); a resumed run must compute what it started: use a new workdir, "
                   f"or the saved settings (train_config.json)"]
    assert snapshot(base / "ref") == before


def test_a_resume_on_other_data_is_refused(reference, tmp_path, monkeypatch, capfd):
    """Another data file, and the same path with other contents: both refused."""
    base, overrides = reference
    monkeypatch.chdir(base)
    train_files = next(o for o in overrides if o.startswith("--config.train_files="))
    corpus = os.path.dirname(train_files.split("=", 1)[1])
    moved = tmp_path / "corpus"
    shutil.copytree(corpus, moved)
    before = snapshot(base / "ref")
    assert pretrain(base / "ref", overrides, f"--config.train_files={moved / '*.txt'}") == 2
    assert "config.train_files: " in capfd.readouterr().err
    work = tmp_path / "work"
    shutil.copytree(base / "ref", work)
    record = json.load(open(work / "train_config.json"))
    record["train_files"] = str(moved / "*.txt")  # the run was made on `moved`, as it was then
    json.dump(record, open(work / "train_config.json", "w"))
    with open(moved / "emma.txt", "a", encoding="utf-8") as f:
        f.write("\nA new paragraph, added after the run began.\n")
    kept = snapshot(work)
    assert pretrain(work, overrides, f"--config.train_files={moved / '*.txt'}") == 2
    err = capfd.readouterr().err
    assert "holds a run with other settings (the training data of 32 tokens: '" in err, err
    assert snapshot(base / "ref") == before and snapshot(work) == kept
