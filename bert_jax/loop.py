"""The step loop shared by pretraining and fine-tuning: batches in, jitted steps, logs, saves.

The caller brings a jitted `step_fn(state, batch, key)` and `batch_for_step(step)` (host numpy,
this process's rows); the loop owns the progress bar, the logging window, periodic checkpoints
and SIGTERM / SIGINT (save, then raise Interrupted).
"""

from __future__ import annotations

import signal
import time
from typing import Callable, Optional

import jax
from tqdm import tqdm

from bert_jax import losses, sharding
from bert_jax.errors import BertJaxError


class Interrupted(Exception):
    """SIGTERM / SIGINT arrived; a checkpoint was saved at `step`."""

    def __init__(self, step: int, signum: int):
        super().__init__(f"stopped by signal {signum} at step {step}; checkpoint saved, run "
                         f"the same command to resume")
        self.step, self.signum = step, signum


class StopRequest:
    """Turns SIGTERM / SIGINT into a flag the loop checks after each step."""

    def __enter__(self):
        self.signum = None
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def _handle(self, signum, frame):
        self.signum = signum

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def run_steps(step_fn, state, batch_for_step: Callable[[int], dict], *, until: int, total: int,
              key, mesh, writer, checkpointer, stop: StopRequest, log_every: int, desc: str,
              summarize: Callable[[dict], dict] = lambda v: v, postfix: tuple = ("loss",),
              after_step: Optional[Callable[[int, object], bool]] = None):
    """Step from state.step to `until` (of `total` in the whole run); returns the new state.

    Logs the window's mean metrics every `log_every` steps and at `until` (`summarize` may add
    derived values); `after_step(step, state)` runs after each step and returns True when it
    spent time (an evaluation) that must not count against tokens/s.
    """
    step = int(sharding.fetch(state.step))
    pc = jax.process_count()
    window, tokens, started = [], 0, time.time()
    bar = tqdm(total=total, initial=step, desc=desc, disable=jax.process_index() != 0,
               dynamic_ncols=True)
    while step < until:
        host = batch_for_step(step)
        tokens += int(host["attention_mask"].sum()) * pc
        state, metrics = step_fn(state, sharding.global_batch(host, mesh), key)
        window.append(metrics)
        step += 1
        bar.update(1)
        if step % log_every == 0 or step == until:
            values = summarize(log_window(window, step, checkpointer))  # waits for the device
            values["tokens_per_second"] = tokens / (time.time() - started)
            writer.write(step, "train", values)
            bar.set_postfix({k: f"{values[k]:.3f}" for k in postfix},
                            tok_s=f"{values['tokens_per_second']:.0f}")
            window, tokens, started = [], 0, time.time()
        if after_step is not None and after_step(step, state) and not window:
            started = time.time()  # keep evaluation time out of the next window's tokens/s
        checkpointer.save(step, state)
        if stop.signum is not None:
            checkpointer.save(step, state, force=checkpointer.latest_step() != step)
            checkpointer.wait()
            bar.close()
            raise Interrupted(step, stop.signum)
    bar.close()
    return state


def log_window(window, step, checkpointer) -> dict[str, float]:
    """Sum a window of per-step metrics on the host; stop on a non-finite step, naming it."""
    fetched = sharding.fetch(window)
    nonfinite = [i for i, m in enumerate(fetched) if m["nonfinite"][0] > 0]
    if nonfinite:
        bad = step - len(fetched) + nonfinite[0] + 1
        raise BertJaxError(
            f"step {bad}: loss or gradient is NaN/Inf (update skipped); resume from the last "
            f"checkpoint, step {checkpointer.latest_step()} in {checkpointer.directory}, "
            f"with a lower learning_rate")
    total = fetched[0]
    for m in fetched[1:]:
        total = losses.add(total, m)
    values = losses.means(total)
    del values["nonfinite"]
    return values
