"""Two processes on localhost (CPU, gloo), failing the ways several machines do: a process
killed (either one, at random moments), a preempted one (SIGTERM), a mismatched launch, a peer
that never joins, workdirs that are not shared. Every failure ends every process within the
heartbeat timeout, in one line, and every rerun ends bit-identical to an uninterrupted run.

Kill moments change every run (set BERT_JAX_FAULT_SEED to replay one); a failure message names
the seed.
"""

import os
import random
import re
import signal
import socket
import subprocess
import time

import numpy as np
import pytest
from conftest import train

RUN = ["--config.steps=40", "--config.checkpoint_every=5", "--config.log_every=10",
       "--config.keep_checkpoints=3"]
HEARTBEAT = 8  # seconds: short for the tests (the default is 20), long for a loaded CI machine
LOST = re.compile(
    r"bert-jax pretrain: error: lost process (\d) of 2 \((no heartbeat for \d+ s|it stopped: "
    r".+)\) (at step \d+|before the first step); (the last complete checkpoint is step (\d+) "
    r"in \S+|no checkpoint is complete yet); rerun all processes to resume")
NO_CRASH = ("Traceback", "stack trace", "terminate called", "Check failure", "Aborted")

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(workdirs, overrides, *extra, per_process=((), ()), initialization_timeout=60,
           port=None):
    """Both processes of a 2-process run (2 fake devices each), one workdir each; Popens."""
    port = port or free_port()
    return [train(workdirs[i], [*overrides, *extra, *per_process[i]], "--coordinator-address",
                  f"localhost:{port}", "--num-processes", "2", "--process-id", str(i),
                  "--initialization-timeout", str(initialization_timeout),
                  "--heartbeat-timeout", str(HEARTBEAT), devices=2, wait=False)
            for i in range(2)]


def finish(procs, timeout=300) -> list[tuple[int, str]]:
    """(exit code, stderr) of each process, once all have ended."""
    results = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"a process still runs after {timeout} s: a hang")
        results.append((p.returncode, err))
    return results


def last_line(err: str) -> str:
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def error_lines(err: str) -> list[str]:
    return [line for line in err.replace("\r", "\n").splitlines()
            if line.startswith("bert-jax pretrain: error")]


def complete_steps(directory) -> list[int]:
    from bert_jax.model_files.paths import complete_steps
    return complete_steps(str(directory))


def params_of(directory) -> tuple[int, dict]:
    from flax import traverse_util

    from bert_jax.model_files.model_dir import latest_checkpoint_params
    step, params = latest_checkpoint_params("", str(directory))
    return step, traverse_util.flatten_dict(params)


def assert_same_params(directory, reference_dir, context=""):
    (step, ours), (ref_step, ref) = params_of(directory), params_of(reference_dir)
    assert step == ref_step == 40, context
    assert ours.keys() == ref.keys()
    for k in ref:
        assert np.array_equal(ours[k], ref[k]), f"{k} {context}"


@pytest.fixture(scope="module")
def reference(pretrain_setup, tmp_path_factory):
    """The uninterrupted 2-process run, with one workdir per process (as on machines that
    share no disk) and checkpoints in a directory both share; its checkpoint directory and
    wall time."""
    _, overrides = pretrain_setup
    root = tmp_path_factory.mktemp("reference")
    workdirs, shared = [root / "host0", root / "host1"], root / "shared_checkpoints"
    started = time.time()
    results = finish(launch(workdirs, overrides, *RUN, f"--config.checkpoint_dir={shared}"))
    for code, err in results:
        assert code == 0, err[-3000:]
    return {"checkpoints": shared, "seconds": time.time() - started, "workdirs": workdirs,
            "errs": [err for _, err in results]}


def test_only_process_0_writes_logs_and_exports_checkpoints_go_to_the_shared_dir(reference):
    host0, host1 = reference["workdirs"]
    assert {"metrics.jsonl", "export", "config.json", "train_config.json"} <= set(
        os.listdir(host0))
    assert not os.path.exists(host0 / "checkpoints")
    written = [os.path.join(d, f) for d, _, files in os.walk(host1) for f in files]
    assert written == []  # process 1 writes nothing of its own
    assert complete_steps(reference["checkpoints"])[-1] == 40


def test_uneven_data_is_dropped_at_epoch_ends_and_the_log_says_so(reference):
    """Every process reads its rows of the same global batch, so none waits for a batch that
    never comes; an epoch's ragged tail is dropped (the log says how many), never padded."""
    for err in reference["errs"]:
        found = re.search(r"uneven data: each epoch's last examples that do not fill a batch "
                          r"of 8 are dropped \((\d+) of epoch 0\), and the last held-out batch is "
                          r"padded, its padding weighted 0; each of the 2 process\(es\) reads "
                          r"its 4 rows of every global batch, so all take the same steps", err)
        assert found and 0 <= int(found[1]) < 8


def test_workdirs_not_shared_refuse_their_checkpoints_before_step_1(pretrain_setup, tmp_path):
    """Each process's WORKDIR/checkpoints is its own: one orbax checkpoint cannot be written
    across both, so both refuse, naming the directory."""
    _, overrides = pretrain_setup
    workdirs = [tmp_path / "host0", tmp_path / "host1"]
    results = finish(launch(workdirs, overrides, *RUN), timeout=180)
    for i, (code, err) in enumerate(results):
        assert code == 2, err[-3000:]
        assert error_lines(err) == [
            f"bert-jax pretrain: error: {workdirs[i] / 'checkpoints'}: process 1 does not see "
            f"the files process 0 writes there; the checkpoints of a multi-process run need "
            f"one directory that every process shares (a network or cluster file system): set "
            f"config.checkpoint_dir to one"], err[-3000:]
    assert complete_steps(workdirs[0] / "checkpoints") == []


def test_a_killed_process_ends_the_other_in_one_line_and_the_rerun_resumes_exactly(
        pretrain_setup, reference, tmp_path):
    """SIGKILL process 1, then (during the rerun) process 0, each at a random moment; each
    time the survivor exits within the heartbeat timeout with the lost-peer line, naming the
    checkpoint the rerun resumes from."""
    _, overrides = pretrain_setup
    seed = int(os.environ.get("BERT_JAX_FAULT_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    workdir, moments, latest = tmp_path / "run", [], []
    for victim in (1, 0):
        procs = launch([workdir, workdir], overrides, *RUN)
        started = time.time()
        moments.append(round(rng.uniform(0.3, 0.8) * reference["seconds"], 2))
        context = f"seed {seed}, kills at {moments} s"
        while (not (workdir / "train_config.json").exists() or time.time() - started < moments[-1]
               ) and all(p.poll() is None for p in procs):
            time.sleep(0.1)  # until both joined and the moment came, or the run ended
        if any(p.poll() is not None for p in procs):  # a resumed run can end before the moment
            for code, err in finish(procs):
                assert code == 0, f"{context}: {err[-3000:]}"
            latest = complete_steps(workdir / "checkpoints")
            break
        procs[victim].send_signal(signal.SIGKILL)
        killed = time.time()
        survivor = procs[1 - victim]
        try:
            _, err = survivor.communicate(timeout=HEARTBEAT + 30)
        except subprocess.TimeoutExpired:
            survivor.kill()
            raise AssertionError(f"process {1 - victim} still runs {HEARTBEAT + 30} s after "
                                 f"process {victim} was killed ({context})")
        seconds = time.time() - killed
        procs[victim].communicate()
        context += f": {err[-3000:]}"
        if survivor.returncode == 0:  # the kill came after the survivor's last collective:
            assert "eval step 40:" in err, context  # it must have finished every step
            latest = complete_steps(workdir / "checkpoints")
            break
        assert survivor.returncode == 3, context
        assert seconds < HEARTBEAT + 10, context
        line = last_line(err)
        match = LOST.fullmatch(line)
        assert match and match[1] == str(victim), context
        assert error_lines(err) == [line], context
        assert not any(word in err for word in NO_CRASH), context
        latest = complete_steps(workdir / "checkpoints")
        if latest:
            assert match[5] == str(latest[-1]), context
    results = finish(launch([workdir, workdir], overrides, *RUN))
    for code, err in results:
        assert code == 0, f"seed {seed}, kills at {moments} s: {err[-3000:]}"
        if latest:
            assert f"resuming from {workdir / 'checkpoints'}/{latest[-1]}\n" in err
    assert_same_params(workdir / "checkpoints", reference["checkpoints"],
                       f"seed {seed}, kills at {moments} s")


def test_sigterm_to_one_process_saves_both_at_one_step_and_resumes_exactly(
        pretrain_setup, reference, tmp_path):
    _, overrides = pretrain_setup
    target = random.Random(time.time_ns()).randrange(2)
    workdir = tmp_path / "run"
    procs = launch([workdir, workdir], overrides, *RUN)
    while not [s for s in complete_steps(workdir / "checkpoints") if s >= 10]:
        assert all(p.poll() is None for p in procs)
        time.sleep(0.05)
    procs[target].send_signal(signal.SIGTERM)
    results = finish(procs, timeout=60)
    stops = []
    for code, err in results:
        assert code == 143, err[-3000:]
        found = re.fullmatch(r"bert-jax pretrain: stopped by signal 15 at step (\d+); checkpoint "
                             r"saved, run the same command to resume", last_line(err))
        assert found, err[-3000:]
        stops.append(int(found[1]))
    assert stops[0] == stops[1] and stops[0] in complete_steps(workdir / "checkpoints")
    assert 10 <= stops[0] < 40
    results = finish(launch([workdir, workdir], overrides, *RUN))
    for code, err in results:
        assert code == 0, err[-3000:]
        assert f"resuming from {workdir / 'checkpoints'}/{stops[0]}\n" in err
    assert_same_params(workdir / "checkpoints", reference["checkpoints"], f"SIGTERM to "
                                                                          f"process {target}")


def test_a_mismatched_launch_is_refused_by_both_before_step_1(pretrain_setup, tmp_path):
    _, overrides = pretrain_setup
    workdir = tmp_path / "run"
    results = finish(launch([workdir, workdir], overrides, *RUN, per_process=(
        (), ("--config.learning_rate=0.001",))), timeout=180)
    expected = ("config.learning_rate: process 0 has 0.002, process 1 has 0.001; start every "
                "process with the same config, data, vocabulary and code (refused before step 1)")
    for i, (code, err) in enumerate(results):
        assert code == 2, err[-3000:]
        flag = "--" if i == 1 else ""  # process 1 set it with --config.learning_rate
        assert error_lines(err) == [f"bert-jax pretrain: error: {flag}{expected}"], err[-3000:]
    assert not workdir.exists()  # refused before anything was written


def test_a_peer_that_never_joins_ends_the_run_after_the_initialization_timeout(
        pretrain_setup, tmp_path):
    _, overrides = pretrain_setup
    port = free_port()
    started = time.time()
    code, _, err = train(tmp_path / "run", [*overrides, *RUN], "--coordinator-address",
                         f"localhost:{port}", "--num-processes", "2", "--process-id", "0",
                         "--initialization-timeout", "5", devices=2, timeout=120)
    assert code == 3, err[-3000:]
    assert time.time() - started < 5 + 40  # start-up, then the timeout
    assert error_lines(err) == [
        f"bert-jax pretrain: error: process 0 of 2: not all 2 processes joined localhost:{port} "
        f"within 5 s (--initialization-timeout); start every process with the same "
        f"--coordinator-address and --num-processes"]
    assert not any(word in err for word in NO_CRASH)
