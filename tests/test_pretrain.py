"""The pretraining job end to end, in subprocesses: exact resume after SIGKILL, 1 vs 8 devices,
1 vs 2 processes, the Hugging Face export, and one-line errors for bad runs."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from bert_jax.config import BertConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def setup(tmp_path_factory):
    """A small corpus (the first 400 lines of three novels), its vocabulary, a tiny model."""
    from bert_jax.tokenizer import train_tokenizer
    base = tmp_path_factory.mktemp("pretrain")
    corpus = base / "corpus"
    corpus.mkdir()
    for name in ("emma", "persuasion", "prideprejudice"):
        lines = open(os.path.join(ROOT, "data", "austen", f"{name}.txt"), encoding="utf-8")
        (corpus / f"{name}.txt").write_text("".join(list(lines)[:400]), encoding="utf-8")
    tok = train_tokenizer(str(corpus / "*.txt"), 600, str(base / "vocab"))
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    config.to_json_file(str(base / "model.json"))
    overrides = [f"--config.model={base / 'model.json'}", f"--config.vocab={base / 'vocab'}",
                 f"--config.train_files={corpus / '*.txt'}", "--config.max_seq_length=32",
                 "--config.max_predictions_per_seq=5", "--config.batch_size=8",
                 "--config.warmup_steps=2", "--config.log_every=1", "--config.eval_every=0",
                 "--config.eval_batches=2", "--config.eval_fraction=0.05"]
    return base, overrides


def train(workdir, overrides, *extra, devices=1, env=None, wait=True, timeout=240):
    env = dict(os.environ, **(env or {}))
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.join(ROOT, "train.py"), "--workdir", str(workdir),
           *overrides, *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def losses(workdir):
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    return np.array([r["loss"] for r in rows if r["split"] == "train"])


def final_params(workdir):
    from bert_jax.checkpoint import latest_params
    return latest_params(str(workdir))


def test_resume_after_sigkill_is_bit_identical(setup, tmp_path):
    base, overrides = setup
    run = [*overrides, "--config.steps=40", "--config.checkpoint_every=4"]
    code, _, err = train(tmp_path / "straight", run)
    assert code == 0, err
    proc = train(tmp_path / "killed", run, wait=False)
    checkpoints = tmp_path / "killed" / "checkpoints"
    deadline = time.time() + 180
    while not (checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir())):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1]
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert not (tmp_path / "killed" / "export").exists()  # really killed mid-run
    killed_at = max(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit())
    assert killed_at < 40
    code, _, err = train(tmp_path / "killed", run)
    assert code == 0, err
    assert f"resuming from {checkpoints}" in err
    (s1, a), (s2, b) = final_params(tmp_path / "straight"), final_params(tmp_path / "killed")
    assert s1 == s2 == 40
    flat_a, flat_b = _flat(a), _flat(b)
    assert flat_a.keys() == flat_b.keys()
    for k in flat_a:
        assert np.array_equal(flat_a[k], flat_b[k]), k


def test_sigterm_saves_then_exits(setup, tmp_path):
    base, overrides = setup
    proc = train(tmp_path, [*overrides, "--config.steps=2000", "--config.checkpoint_every=1000"],
                 wait=False)
    deadline = time.time() + 180
    while not (tmp_path / "metrics.jsonl").is_file():  # training has started
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    step = int(err.split("stopped by signal 15 at step ")[1].split(";")[0])
    assert 0 < step < 2000 and "checkpoint saved" in err
    assert final_params(tmp_path)[0] == step  # saved at the step it stopped, off the schedule


def test_init_from_a_workdir_starts_from_its_params(setup, one_device_run, tmp_path):
    base, overrides = setup
    # warmup 1: the one step runs at learning rate 0, so the params must come out unchanged
    code, _, err = train(tmp_path, [*overrides, f"--config.init_from={one_device_run}",
                                    "--config.steps=1", "--config.warmup_steps=1"])
    assert code == 0, err
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
    code, _, err = train(workdir, [*overrides, "--config.steps=5"])
    assert code == 0, err
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

    from bert_jax.heads import BertForPreTraining
    from bert_jax.pretrained import load_pretrained
    from bert_jax.tokenizer import load
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


@pytest.mark.parametrize("extra,needle", [
    (["--config.stesp=3"], "--config.stesp: unknown config field; did you mean steps?"),
    (["--config.batch_size=0"], "config.batch_size: expected an integer ≥ 1, got 0"),
    (["--config.hidden=3"], "unknown config field"),
    (["--config.train_files=/nonexistent/*.txt"], "/nonexistent/*.txt"),
    (["--config.batch_size=7", "--config.steps=3"], "does not divide evenly"),
])
def test_bad_runs_fail_in_one_line(setup, tmp_path, extra, needle):
    base, overrides = setup
    code, out, err = train(tmp_path / "w", [*overrides, *extra], devices=2)
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0] == err.strip().splitlines()[-1], err
    assert not os.path.exists(tmp_path / "w" / "checkpoints")


def test_workdir_of_another_model_is_refused(setup, one_device_run, tmp_path):
    base, overrides = setup
    other = BertConfig.from_json_file(str(base / "model.json")).replace(hidden_size=48,
                                                                        num_attention_heads=3)
    other.to_json_file(str(tmp_path / "other.json"))
    code, _, err = train(one_device_run, [*overrides, f"--config.model={tmp_path / 'other.json'}",
                                          "--config.steps=6"])
    assert code == 2 and "holds a checkpoint of a different model (hidden_size 32 there, " \
                         "48 here" in err, err
