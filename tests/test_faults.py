"""Killed runs and failed saves lose nothing: after SIGKILL at random moments, SIGKILL in the
middle of a checkpoint save, SIGTERM, or a disk that fills during a save, the same command
resumes from the last complete checkpoint and ends bit-identical to an uninterrupted run.

Random kill moments change every run (set BERT_JAX_FAULT_SEED to replay one); a failure
message names the seed. Faults are injected by tests/fault_driver.py, never by the library.

The faulted runs are processes (train, a subprocess); the uninterrupted reference and the
reruns that resume run in this process (train_here): the same command, where the process is not
the point. The slow tier checks that a subprocess's run is bit-identical to the reference here.
"""

import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest
from conftest import CONFIG, train, train_here

RUN = ["--config.steps=30", "--config.checkpoint_every=5", "--config.log_every=10",
       "--config.keep_checkpoints=3"]
TMP = ".orbax-checkpoint-tmp"


def complete_steps(workdir) -> list[int]:
    directory = os.path.join(workdir, "checkpoints")
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(int(n) for n in names if n.isdigit())


def half_written(workdir) -> list[str]:
    directory = os.path.join(workdir, "checkpoints")
    return [n for n in os.listdir(directory) if TMP in n] if os.path.isdir(directory) else []


def params_of(workdir) -> dict:
    from flax import traverse_util

    from bert_jax.model_files.model_dir import latest_checkpoint_params as latest_params
    step, params = latest_params(str(workdir))
    return step, traverse_util.flatten_dict(params)


def assert_same_params(workdir, reference_dir):
    (step, ours), (ref_step, ref) = params_of(workdir), params_of(reference_dir)
    assert step == ref_step == 30
    assert ours.keys() == ref.keys()
    for k in ref:
        assert np.array_equal(ours[k], ref[k]), k


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line.lower()]


def resumed_from(caplog) -> list[str]:
    """The checkpoints a run in this process said it resumed from."""
    return [m.split("resuming from ", 1)[1] for m in caplog.messages
            if m.startswith("resuming from ")]


@pytest.fixture(scope="module")
def reference(pretrain_setup, tmp_path_factory):
    """The uninterrupted run every faulted run must end identical to (in this process)."""
    _, overrides = pretrain_setup
    workdir = tmp_path_factory.mktemp("reference")
    assert train_here(workdir, [*overrides, *RUN]) == 0
    return workdir


@pytest.fixture(scope="module")
def process_seconds(pretrain_setup, reference, tmp_path_factory):
    """The wall time of the uninterrupted run as a process (where the kill moments fall); that
    run ends bit-identical to the reference made in this process."""
    _, overrides = pretrain_setup
    workdir = tmp_path_factory.mktemp("reference_process")
    started = time.time()
    code, _, err = train(workdir, [*overrides, *RUN])
    seconds = time.time() - started
    assert code == 0, err
    assert_same_params(workdir, reference)
    return seconds


@pytest.mark.slow  # a loop of up to four processes, three killed
def test_sigkill_at_random_moments_resumes_exactly(pretrain_setup, reference, process_seconds,
                                                   tmp_path):
    _, overrides = pretrain_setup
    reference_dir, seconds = reference, process_seconds
    seed = int(os.environ.get("BERT_JAX_FAULT_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    workdir, moments = tmp_path / "run", []
    for _ in range(3):
        before = complete_steps(workdir)
        proc = train(workdir, [*overrides, *RUN], wait=False)
        moments.append(round(rng.uniform(0.3, 1.0) * seconds, 2))
        try:
            proc.wait(timeout=moments[-1])
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        context = f"seed {seed}, kills at {moments} s: {err[-2000:]}"
        assert proc.returncode in (0, -signal.SIGKILL), context
        if before and "resuming from" in err:  # got as far as restoring: the latest complete
            assert f"resuming from {workdir / 'checkpoints'}/{before[-1]}\n" in err, context
        if proc.returncode == 0:
            break
        assert not complete_steps(workdir) or complete_steps(workdir)[-1] >= (before or [0])[-1]
    latest = complete_steps(workdir)
    code, _, err = train(workdir, [*overrides, *RUN])
    assert code == 0, f"seed {seed}, kills at {moments} s: {err[-2000:]}"
    if latest and latest[-1] < 30:
        assert f"resuming from {workdir / 'checkpoints'}/{latest[-1]}\n" in err
    assert half_written(workdir) == []
    assert_same_params(workdir, reference_dir)


@pytest.mark.slow  # two processes
def test_a_second_run_on_a_busy_workdir_is_refused_and_the_first_is_unharmed(
        pretrain_setup, reference, tmp_path):
    """A command started twice on one workdir: the second is refused within 5 s, naming the
    first, and the first ends exactly as it would alone."""
    import socket
    _, overrides = pretrain_setup
    first = train(tmp_path, [*overrides, *RUN], wait=False)
    deadline = time.time() + 60
    while not (tmp_path / ".lock").is_file():  # the first holds the workdir
        assert first.poll() is None and time.time() < deadline, first.communicate()[1]
        time.sleep(0.01)
    started = time.time()
    code, _, err = train(tmp_path, [*overrides, *RUN])
    refused_in = time.time() - started
    assert code == 2, err
    assert err.splitlines() == [
        f"bert-jax pretrain: error: {tmp_path}: another run is using this workdir (pid "
        f"{first.pid} on host {socket.gethostname()}); wait for it to end or give another "
        f"workdir"]
    assert refused_in < 5, refused_in
    _, err = first.communicate(timeout=240)
    assert first.returncode == 0, err
    assert not (tmp_path / ".lock").exists()
    assert_same_params(tmp_path, reference)


def test_sigkill_in_the_middle_of_a_save(pretrain_setup, reference, tmp_path, caplog):
    """Killed with checkpoint 10 fully written but not committed: it is never restored, the
    rerun resumes from 5, removes the leftover and saves 10 again. (Orbax also saves the first
    step of a fresh run.)"""
    _, overrides = pretrain_setup
    code, _, err = train(tmp_path, [*overrides, *RUN], script="tests/fault_driver.py",
                         env={"BERT_JAX_FAULT": "kill_at_commit:10"})
    assert code == -signal.SIGKILL, err
    assert complete_steps(tmp_path) == [1, 5] and half_written(tmp_path) == [f"10{TMP}"]
    assert os.listdir(tmp_path / "checkpoints" / f"10{TMP}")  # the data was written
    assert train_here(tmp_path, [*overrides, *RUN]) == 0
    assert resumed_from(caplog) == [f"{tmp_path / 'checkpoints'}/5"]
    assert half_written(tmp_path) == []
    assert complete_steps(tmp_path) == [20, 25, 30]
    assert_same_params(tmp_path, reference)


def test_sigterm_saves_exits_and_resumes_exactly(pretrain_setup, reference, tmp_path, caplog):
    _, overrides = pretrain_setup
    proc = train(tmp_path, [*overrides, *RUN], wait=False)
    deadline = time.time() + 180
    while not (tmp_path / "metrics.jsonl").is_file():  # training has started
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.fail("the run finished before SIGTERM arrived; make RUN longer")
    assert proc.returncode == 128 + signal.SIGTERM, err
    step = int(err.split("stopped by signal 15 at step ")[1].split(";")[0])
    assert complete_steps(tmp_path)[-1] == step and half_written(tmp_path) == []
    assert train_here(tmp_path, [*overrides, *RUN]) == 0
    assert resumed_from(caplog) == [f"{tmp_path / 'checkpoints'}/{step}"]
    assert_same_params(tmp_path, reference)


def test_full_disk_during_a_save_fails_loudly_and_keeps_the_last_checkpoint(
        pretrain_setup, reference, tmp_path, caplog):
    _, overrides = pretrain_setup
    code, _, err = train(tmp_path, [*overrides, *RUN], script="tests/fault_driver.py",
                         env={"BERT_JAX_FAULT": "disk_full_after:10"})
    assert code == 2, err
    assert "Traceback" not in err, err
    assert error_lines(err) == [
        f"bert-jax pretrain: error: {tmp_path / 'checkpoints'}: saving a checkpoint failed "
        f"(File too large); the last complete checkpoint, step 10, is intact and the same "
        f"command resumes from it"], err
    assert complete_steps(tmp_path) == [1, 5, 10]
    assert not (tmp_path / "export").exists()
    assert train_here(tmp_path, [*overrides, *RUN]) == 0  # space again: resume from step 10
    assert resumed_from(caplog) == [f"{tmp_path / 'checkpoints'}/10"]
    assert half_written(tmp_path) == []
    assert_same_params(tmp_path, reference)


def test_a_sharded_prepared_set_trains_as_raw_text_and_resumes_exactly_after_a_kill(
        pretrain_setup, reference, tmp_path, capsys, caplog):
    """`bert-jax prepare` in 3 shards (one job per shard, as on 3 machines; here, one after
    another), then pretraining on the set, killed once and rerun, ends bit-identical to the
    reference run on the raw text."""
    from bert_jax import cli
    base, overrides = pretrain_setup
    prepared = tmp_path / "prepared"
    flags = [o for o in overrides if o.startswith(("--config.vocab", "--config.train_files"))]
    for shard in (2, 0, 1):  # any order; the last job writes the manifest
        code = cli.main(["prepare", "--config", CONFIG, "--out", str(prepared), "--shard",
                         str(shard), "--num-shards", "3", *flags])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert ("prepared set complete" in out) == (shard == 1), out
    assert sorted(os.listdir(prepared)) == ["manifest.json", "shard-00000-of-00003",
                                            "shard-00001-of-00003", "shard-00002-of-00003",
                                            "vocab"]
    on_set = [o for o in overrides if not o.startswith("--config.train_files")]
    on_set.append(f"--config.train_files={prepared}")
    workdir = tmp_path / "run"
    proc = train(workdir, [*on_set, *RUN], wait=False)
    deadline = time.time() + 180
    while not complete_steps(workdir) or complete_steps(workdir)[-1] < 10:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    latest = complete_steps(workdir)[-1]
    assert latest < 30
    assert train_here(workdir, [*on_set, *RUN]) == 0
    assert resumed_from(caplog) == [f"{workdir / 'checkpoints'}/{latest}"]
    assert_same_params(workdir, reference)
