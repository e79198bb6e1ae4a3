"""The step loop shared by pretraining and fine-tuning: batches in, jitted steps, logs, saves.

The caller brings its RunContext, a jitted `step_fn(state, batch, key)` and
`batch_for_step(step)` (host numpy, this process's rows); the loop owns the progress bar, the
logging window, periodic checkpoints and SIGTERM / SIGINT (save, then raise Interrupted).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
from typing import Callable, Optional

import jax
from jax.experimental import multihost_utils
from tqdm import tqdm

from bert_jax.errors import BertJaxError
from bert_jax.runtime import multihost, sharding
from bert_jax.training import losses

log = logging.getLogger("bert_jax")


class Interrupted(Exception):
    """SIGTERM / SIGINT arrived; a checkpoint was saved at `step`."""

    def __init__(self, step: int, signum: int):
        super().__init__(f"stopped by signal {signum} at step {step}; checkpoint saved, run "
                         f"the same command to resume")
        self.step, self.signum = step, signum


class StopRequest:
    """Turns SIGTERM / SIGINT into a stop the loop checks after each step.

    With several processes, SIGTERM is left to JAX's preemption notifier (it installs its own
    handler at jax.distributed.initialize) and SIGINT is passed on to it as a SIGTERM, so that
    `at(step)` is true on every process at the same step, whichever process got the signal.
    """

    def __enter__(self):
        self.signum = None
        self.several = jax.process_count() > 1  # also when a script joined jax.distributed
        caught = (signal.SIGINT,) if self.several else (signal.SIGTERM, signal.SIGINT)
        self.previous = {s: signal.signal(s, self._handle) for s in caught}
        return self

    def _handle(self, signum, frame):
        self.signum = signum
        if self.several:
            os.kill(os.getpid(), signal.SIGTERM)

    def at(self, step: int) -> Optional[int]:
        """The signal to stop for after `step`, or None (call it after every step)."""
        if self.several:
            if multihost_utils.reached_preemption_sync_point(step):
                return self.signum or signal.SIGTERM  # here, or on another process
            return None
        return self.signum

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)


MAX_CONSECUTIVE_SKIPS = 100  # with on_nonfinite="skip", a run this broken stops anyway


def run_steps(ctx, step_fn, state, batch_for_step: Callable[[int], dict], *, until: int,
              total: int, log_every: int, desc: str,
              summarize: Callable[[dict], dict] = lambda v: v, postfix: tuple = ("loss",),
              after_step: Optional[Callable[[int, object], bool]] = None,
              on_nonfinite: str = "stop", should_stop: Optional[Callable[[int], bool]] = None,
              on_save: Optional[Callable[[int], None]] = None):
    """Step from state.step to `until` (of `total` in the whole run); returns the new state.

    `ctx` is the job's training.run.RunContext (its key, mesh, writer, checkpointer and stop
    flag are used). Logs the window's mean metrics every `log_every` steps and at `until`
    (`summarize` may add derived values; the bar shows the `postfix` metrics the step has);
    `after_step(step, state)` runs after each step and
    returns True when it spent time (an evaluation) that must not count against tokens/s. A
    step whose loss or gradient is NaN/Inf has already skipped its update in-step;
    `on_nonfinite` says whether the run then stops ("stop", naming the step and the last
    checkpoint) or goes on ("skip"). Each log also holds tokens_per_second (non-padding tokens)
    and padding_share (the window's padding positions / all its positions, every process's).
    `should_stop(step)`, asked before each step, ends the run early (a time budget spent);
    `on_save(step)` runs when a checkpoint save starts.
    """
    checkpointer, stop = ctx.checkpointer, ctx.stop
    step = int(sharding.fetch(state.step))
    pc = jax.process_count()
    window, tokens, positions, started, skipped_run = [], 0, 0, time.time(), 0
    bar = tqdm(total=total, initial=step, desc=desc, disable=jax.process_index() != 0,
               dynamic_ncols=True)
    multihost.RUN.bar_open = not bar.disable  # a lost-peer line starts on a line of its own

    def log_window():
        nonlocal window, tokens, positions, started, skipped_run
        fetched = sharding.fetch(window)  # waits for the device
        skipped_run = _check_finite(fetched, step, checkpointer, on_nonfinite, skipped_run)
        values = summarize(window_means(fetched))
        values["tokens_per_second"] = tokens / max(time.time() - started, 1e-9)
        values["padding_share"] = 1.0 - tokens / positions
        ctx.writer.write(step, "train", values)
        bar.set_postfix({k: f"{values[k]:.3f}" for k in postfix if k in values},
                        tok_s=f"{values['tokens_per_second']:.0f}",
                        pad=f"{values['padding_share']:.2f}")
        window, tokens, positions, started = [], 0, 0, time.time()

    def save(force=False):
        if checkpointer.save(step, state, force=force) and on_save is not None:
            on_save(step)

    try:  # the bar ends before any error is printed, so the error has its own line
        while step < until:
            if should_stop is not None and should_stop(step):
                if window:
                    log_window()
                break
            host = batch_for_step(step)
            tokens += int(host["attention_mask"].sum()) * pc
            positions += host["attention_mask"].size * pc
            state, metrics = step_fn(state, sharding.global_batch(host, ctx.mesh), ctx.key)
            window.append(metrics)
            step += 1
            bar.update(1)
            if step % log_every == 0 or step == until:
                log_window()
            if after_step is not None and after_step(step, state) and not window:
                started = time.time()  # keep evaluation time out of the next window's tokens/s
            multihost.note_step(step)
            save()
            signum = stop.at(step)
            if signum is not None:
                save(force=checkpointer.latest_step() != step)
                checkpointer.wait()
                raise Interrupted(step, signum)
    finally:
        bar.close()
        multihost.RUN.bar_open = False
    return state


def _check_finite(fetched: list, step: int, checkpointer, on_nonfinite: str,
                  skipped_run: int) -> int:
    """Stop at (or warn about) the window's non-finite steps; returns the consecutive-skip count."""
    first = step - len(fetched) + 1
    for i, m in enumerate(fetched):
        if m["nonfinite"][0] == 0:
            skipped_run = 0
            continue
        skipped_run += 1
        latest = checkpointer.latest_step()
        where = (f"resume from the last checkpoint, step {latest} in {checkpointer.directory}"
                 if latest is not None else
                 f"no checkpoint is complete yet in {checkpointer.directory}: start again")
        if on_nonfinite == "stop":
            raise BertJaxError(
                f"step {first + i}: loss or gradient is NaN/Inf (update skipped); {where}, with "
                f"a lower learning_rate, or set config.on_nonfinite=skip")
        if skipped_run >= MAX_CONSECUTIVE_SKIPS:
            raise BertJaxError(
                f"step {first + i}: {skipped_run} updates in a row skipped for NaN/Inf loss or "
                f"gradient; the run has diverged: {where}, with a lower learning_rate")
        log.warning("step %d: loss or gradient is NaN/Inf; update skipped "
                    "(config.on_nonfinite=skip)", first + i)
    return skipped_run


def window_means(fetched: list) -> dict[str, float]:
    """Mean metrics of a window of fetched per-step metrics, over the steps that updated;
    `skipped_updates` counts the others."""
    kept = [m for m in fetched if m["nonfinite"][0] == 0]
    values = losses.means(functools.reduce(losses.add, kept)) if kept else {
        name: float("nan") for name in fetched[0]}
    del values["nonfinite"]
    values["skipped_updates"] = float(len(fetched) - len(kept))
    return values
