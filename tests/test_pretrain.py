"""The pretraining job end to end: init_from, 1 vs 8 devices, 1 vs 2 processes, the Hugging
Face export, and one-line errors for bad runs. Runs happen in this process (train_here) unless a
device count or several processes are the point (train, a subprocess). Kills and resumes are in
test_faults.py."""

import json
import os
import socket

import numpy as np
import pytest
from conftest import train, train_here

from bert_jax.models.config import BertConfig


@pytest.fixture(scope="session")
def setup(pretrain_setup):
    return pretrain_setup


def losses(workdir):
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    return np.array([r["loss"] for r in rows if r["split"] == "train"])


def final_params(workdir):
    from bert_jax.model_files.model_dir import latest_checkpoint_params as latest_params
    return latest_params(str(workdir))


def test_init_from_a_workdir_starts_from_its_params(setup, one_device_run, tmp_path):
    base, overrides = setup
    # warmup 1: the one step runs at learning rate 0, so the params must come out unchanged
    code = train_here(tmp_path, [*overrides, f"--config.init_from={one_device_run}",
                                 "--config.steps=1", "--config.warmup_steps=1"])
    assert code == 0
    (_, a), (_, b) = final_params(one_device_run), final_params(tmp_path)
    flat_a, flat_b = _flat(a), _flat(b)
    assert flat_a.keys() == flat_b.keys()
    assert all(np.array_equal(flat_a[k], flat_b[k]) for k in flat_a)


def _flat(tree):
    from flax import traverse_util
    return traverse_util.flatten_dict(tree)


@pytest.fixture(scope="module")
def one_device_run(setup, tmp_path_factory):
    base, overrides = setup
    workdir = tmp_path_factory.mktemp("one_device")
    assert train_here(workdir, [*overrides, "--config.steps=5"]) == 0
    return workdir


def test_eight_devices_match_one(setup, one_device_run, tmp_path):
    base, overrides = setup
    code, _, err = train(tmp_path, [*overrides, "--config.steps=5"], devices=8)
    assert code == 0, err
    one, eight = losses(one_device_run), losses(tmp_path)
    assert len(one) == len(eight) == 5
    np.testing.assert_allclose(eight, one, atol=1e-5)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two processes
def test_two_processes_match_one(setup, one_device_run, tmp_path):
    base, overrides = setup
    address = f"localhost:{_free_port()}"
    procs = [train(tmp_path, [*overrides, "--config.steps=5"], "--coordinator_address", address,
                   "--num_processes", "2", "--process_id", str(i), "--initialization_timeout",
                   "60", devices=2, wait=False) for i in range(2)]
    results = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err
    np.testing.assert_allclose(losses(tmp_path), losses(one_device_run), atol=1e-5)


def test_export_loads_in_transformers_and_fill_mask_agrees(setup, one_device_run):
    import torch
    import transformers

    from bert_jax.models.task_models import BertForPreTraining
    from bert_jax.model_files.model_dir import load_pretrained
    from bert_jax.data.tokenizer import load
    export = str(one_device_run / "export")
    hf, info = transformers.BertForPreTraining.from_pretrained(export, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    config, params = load_pretrained(str(one_device_run))  # the workdir's latest checkpoint
    tok = load(os.path.join(export, "tokenizer.json"))
    text = ["Emma Woodhouse, handsome, clever, and rich, with a comfortable home.",
            "It is a truth universally acknowledged, that a single man must be in want."]
    enc = tok.encode_batch(text)
    length = min(len(e.ids) for e in enc)
    ids = np.array([e.ids[:length] for e in enc])
    positions = np.array([[2, 4, 6], [1, 3, 5]])
    masked = ids.copy()
    np.put_along_axis(masked, positions, tok.token_to_id("[MASK]"), axis=1)
    ours, _ = BertForPreTraining(config).apply({"params": params}, masked,
                                               masked_lm_positions=positions)
    with torch.no_grad():
        theirs = hf(torch.from_numpy(masked)).prediction_logits.numpy()
    theirs = np.take_along_axis(theirs, positions[..., None], axis=1)
    np.testing.assert_array_equal(np.argmax(ours, -1), np.argmax(theirs, -1))
    assert np.abs(np.asarray(ours) - theirs).max() < 1e-4


def _fails_in_one_line(code, err, needle, workdir):
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0] == err.strip().splitlines()[-1], err
    assert not os.path.exists(workdir / "checkpoints")


@pytest.mark.parametrize("extra,needle", [
    (["--config.stesp=3"], "--config.stesp: unknown config field; did you mean steps?"),
    (["--config.batch_size=0"], "config.batch_size: expected an integer ≥ 1, got 0"),
    (["--config.hidden=3"], "unknown config field"),
    (["--config.train_files=/nonexistent/*.txt"], "/nonexistent/*.txt"),
])
def test_bad_runs_fail_in_one_line(setup, tmp_path, capfd, extra, needle):
    base, overrides = setup
    code = train_here(tmp_path / "w", [*overrides, *extra])
    _fails_in_one_line(code, capfd.readouterr().err, needle, tmp_path / "w")


def test_a_batch_that_does_not_divide_over_the_devices_fails_in_one_line(setup, tmp_path):
    """train.py itself, on 2 devices (a device count needs a process of its own)."""
    base, overrides = setup
    code, out, err = train(tmp_path / "w", [*overrides, "--config.batch_size=7",
                                            "--config.steps=3"], devices=2)
    _fails_in_one_line(code, err, "does not divide evenly", tmp_path / "w")


def test_workdir_of_another_model_is_refused(setup, one_device_run, tmp_path, capfd):
    base, overrides = setup
    other = BertConfig.from_json_file(str(base / "model.json")).replace(hidden_size=48,
                                                                        num_attention_heads=3)
    other.to_json_file(str(tmp_path / "other.json"))
    code = train_here(one_device_run, [*overrides, f"--config.model={tmp_path / 'other.json'}",
                                       "--config.steps=6"])
    err = capfd.readouterr().err
    assert code == 2 and "holds a checkpoint of a different model (hidden_size 32 there, " \
                         "48 here" in err, err


def test_packed_mlm_objective_trains_without_nsp_and_fills_its_rows(setup, tmp_path, capfd):
    """objective="mlm" end to end: no NSP loss or metric anywhere, rows ≥ 97% tokens (the
    corpus's documents are split at blank lines into many short ones), a working export."""
    import transformers
    base, overrides = setup
    code = train_here(tmp_path, [*overrides, "--config.objective=mlm", "--config.steps=4",
                                 "--config.documents=blank_line"])
    out, err = capfd.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    train_rows = [r for r in rows if r["split"] == "train"]
    assert len(train_rows) == 4 and not any("nsp_loss" in r for r in rows)
    assert all(r["loss"] == r["mlm_loss"] for r in train_rows)
    assert all(r["padding_share"] <= 0.03 for r in train_rows)
    final = [r for r in rows if r["split"] == "eval"][-1]
    assert set(final) >= {"mlm_accuracy", "mlm_perplexity"} and "nsp_accuracy" not in final
    assert "NSP" not in out
    hf = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "export"))
    assert hf.config.vocab_size == BertConfig.from_json_file(str(base / "model.json")).vocab_size


def test_the_export_has_a_model_card_with_the_runs_scores(one_device_run, monkeypatch):
    """README.md in the export: the Hub's header (huggingface_hub parses it, offline) whose
    model-index holds the final held-out scores of metrics.jsonl."""
    from huggingface_hub import ModelCard
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    card = ModelCard.load(str(one_device_run / "export" / "README.md"))
    final = [r for r in map(json.loads, open(one_device_run / "metrics.jsonl"))
             if r["split"] == "eval"][-1]
    assert (card.data.library_name, card.data.pipeline_tag) == ("transformers", "fill-mask")
    assert "bert_jax" in card.data.tags and card.data.base_model is None  # a local start
    scores = {r.metric_name: r.metric_value for r in card.data.eval_results}
    assert scores == {"held-out MLM accuracy": final["mlm_accuracy"],
                      "held-out MLM perplexity": final["mlm_perplexity"],
                      "held-out NSP accuracy": final["nsp_accuracy"]}
    assert "for 5 steps" in card.text and "BertForPreTraining.from_pretrained" in card.text
    assert "load_pretrained" in card.text and "Machine: " in card.text


def test_sentence_order_objective_trains_its_head_on_in_and_out_of_order_pairs(setup, tmp_path):
    """objective="mlm+sop" end to end: the [CLS] head's loss and held-out accuracy are logged
    (as nsp_*), and the export is a BertForPreTraining (the pairs: test_pretraining_data)."""
    import transformers
    base, overrides = setup
    assert train_here(tmp_path, [*overrides, "--config.objective=mlm+sop",
                                 "--config.steps=4"]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert all("nsp_loss" in r for r in rows if r["split"] == "train")
    assert "nsp_accuracy" in [r for r in rows if r["split"] == "eval"][-1]
    transformers.BertForPreTraining.from_pretrained(str(tmp_path / "export"))


def test_pretraining_logs_the_probe_at_every_evaluation(setup, tmp_path):
    """probe/<name> in metrics.jsonl (split "probe") at the start and at each evaluation, the
    last equal to the probe of the exported encoder recomputed from scratch."""
    import csv

    from bert_jax.model_files.huggingface import load_hf
    from bert_jax.data import tokenizer
    from bert_jax.training import probe
    base, overrides = setup
    rows = tmp_path / "reviews" / "train.csv"
    rows.parent.mkdir()
    with open(rows, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i in range(60):
            writer.writerow([("she was very glad to see him" if i % 2 else
                              "he was sorry and went away") + f" {i}", "pos" if i % 2 else "neg"])
    workdir = tmp_path / "run"
    assert train_here(workdir, overrides, "--config.steps=4", "--config.eval_every=2",
                      f"--config.probe_file={rows}", "--config.probe_examples=50") == 0
    records = [json.loads(line) for line in open(workdir / "metrics.jsonl", encoding="utf-8")]
    probes = [r for r in records if r["split"] == "probe"]
    assert [r["step"] for r in probes] == [0, 2, 4]  # the start, then every evaluation
    assert all(-1 <= r["reviews"] <= 1 for r in probes)
    config, params = load_hf(str(workdir / "export"))
    data = probe.load_probe(str(rows), tokenizer.load(str(workdir / "export")), 32, "text",
                            "label", 50)
    assert len(data.labels) == 50
    tok = tokenizer.load(str(workdir / "export"))
    assert probe.run_probe(config, params["bert"], tok, data)["reviews"] == \
        pytest.approx(probes[-1]["reviews"], abs=1e-6)
