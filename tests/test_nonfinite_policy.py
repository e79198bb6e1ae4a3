"""The step loop's NaN/Inf policy: the step has already skipped a non-finite update and flagged
it; `on_nonfinite="stop"` stops naming the step and the last checkpoint, "skip" warns and goes
on (logging means over the steps that updated), and a run that only skips stops anyway."""

import logging

import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.errors import BertJaxError
from bert_jax.runtime import sharding
from bert_jax.training import loop
from bert_jax.training import run as run_context


class State:
    def __init__(self, step):
        self.step = jnp.int32(step)


class FakeCheckpointer:
    directory = "/runs/x/checkpoints"

    def __init__(self, latest=4):
        self.saved, self.latest = [], latest

    def latest_step(self):
        return self.latest

    def save(self, step, state, force=False):
        self.saved.append(step)


class Writer:
    def __init__(self):
        self.rows = []

    def write(self, step, split, values):
        self.rows.append((step, split, dict(values)))


def run(bad_steps, policy, steps=6, log_every=3, latest=4):
    """Loss 1.0 per step, except NaN (flagged, update skipped) at the 1-based `bad_steps`."""

    def step_fn(state, batch, key):
        n = int(state.step) + 1
        bad = n in bad_steps
        metrics = {"loss": (jnp.float32(np.nan if bad else float(n)), jnp.float32(1.0)),
                   "nonfinite": (jnp.float32(bad), jnp.float32(1.0))}
        return State(n), metrics

    writer = Writer()
    with loop.StopRequest() as stop:
        ctx = run_context.RunContext(workdir="/runs/x", mesh=sharding.make_mesh(), writer=writer,
                                     checkpointer=FakeCheckpointer(latest), stop=stop, key=None,
                                     is_main=True)
        loop.run_steps(ctx, step_fn, State(0),
                       lambda s: {"attention_mask": np.ones((2, 4), np.int32)},
                       until=steps, total=steps, log_every=log_every, desc="test",
                       on_nonfinite=policy)
    return writer.rows


def test_stop_names_the_step_and_the_checkpoint():
    with pytest.raises(BertJaxError, match=r"^step 5: loss or gradient is NaN/Inf \(update "
                                           r"skipped\); resume from the last checkpoint, step 4 "
                                           r"in /runs/x/checkpoints, .*on_nonfinite=skip"):
        run({5}, "stop")


def test_stop_before_any_checkpoint_says_so():  # not "step None"
    with pytest.raises(BertJaxError, match=r"^step 2: loss or gradient is NaN/Inf \(update "
                                           r"skipped\); no checkpoint is complete yet in "
                                           r"/runs/x/checkpoints: start again, with a lower "):
        run({2}, "stop", latest=None)


def test_skip_warns_and_logs_means_over_the_updated_steps(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        rows = run({5}, "skip")
    assert [r[0] for r in rows] == [3, 6]
    assert rows[0][2]["loss"] == pytest.approx(2.0) and rows[0][2]["skipped_updates"] == 0
    assert rows[1][2]["loss"] == pytest.approx(5.0)  # steps 4 and 6; 5 left out
    assert rows[1][2]["skipped_updates"] == 1
    assert [r.getMessage() for r in caplog.records] == [
        "step 5: loss or gradient is NaN/Inf; update skipped (config.on_nonfinite=skip)"]


def test_skip_stops_a_run_that_has_diverged():
    n = loop.MAX_CONSECUTIVE_SKIPS
    with pytest.raises(BertJaxError, match=f"^step {n + 2}: {n} updates in a row skipped"):
        run(set(range(3, 3 + n + 10)), "skip", steps=n + 20, log_every=5)
