"""A run tied to a wall-clock budget (config.time_budget_minutes): the clock the rate decays
with, the step at which the run stops, and the time a resumed run has already spent.

The budget counts the training loop's wall clock, compilation and held-out evaluations
included (what a user waits for), from the first step; preparing the data and training a
vocabulary come before it and are cached after the first run. Every process reads process 0's
clock, so all of them switch phase, scale the rate and stop at the same step. A checkpoint's
elapsed time is kept in WORKDIR/time_budget.json, so a resumed run spends only what is left.
"""

from __future__ import annotations

import json
import logging
import os
import time

import jax
import numpy as np

from bert_jax.model_files import atomic, paths
from bert_jax.training import optim

log = logging.getLogger("bert_jax")

FILE = paths.TIME_BUDGET


class Clock:
    """The training clock of a time-budget run; `tick()` once per step, before the step."""

    def __init__(self, minutes: float, workdir: str, is_main: bool, decay_share: float = 1.0):
        self.budget = minutes * 60.0
        self.decay_share = decay_share  # the rate decays over the budget's last share
        self.path = os.path.join(workdir, FILE)
        self.is_main = is_main
        self.offset = 0.0  # seconds spent before this process started (a resumed run)
        self.started = None
        self.value = 0.0  # elapsed seconds at the last tick

    def resume(self, step: int) -> None:
        """Count the time the run had spent when checkpoint `step` was saved."""
        if step == 0:
            return
        spent = _read(self.path).get("elapsed_seconds", {}).get(str(step))
        if spent is None:
            if self.is_main:
                log.warning("%s: no elapsed time for checkpoint %d; the budget counts from "
                            "this restart", self.path, step)
            return
        self.offset = float(spent)
        log.info("time budget: %.1f of %.1f minutes spent before step %d", spent / 60,
                 self.budget / 60, step)

    def tick(self) -> float:
        """Elapsed seconds now, process 0's on every process; starts the clock on first use."""
        if self.started is None:
            self.started = time.monotonic()
        elapsed = self.offset + time.monotonic() - self.started
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils
            elapsed = float(multihost_utils.broadcast_one_to_all(np.float64(elapsed)))
        self.value = elapsed
        return elapsed

    def share(self) -> float:
        """The share of the budget spent at the last tick."""
        return self.value / self.budget

    def rate_scale(self) -> float:
        """The factor on the step schedule's rate at the last tick: 1 → 0 over the budget (its
        last decay_share)."""
        return optim.budget_scale(self.value, self.budget, self.decay_share)

    def expired(self) -> bool:
        return self.value >= self.budget

    def record(self, step: int) -> None:
        """Keep the elapsed time of a checkpoint being saved at `step` (process 0 writes, its
        own clock now: the step before the save is done, compile included)."""
        if not self.is_main:
            return
        data = _read(self.path)
        spent = data.setdefault("elapsed_seconds", {})
        now = self.offset + (time.monotonic() - self.started if self.started else 0.0)
        spent[str(step)] = max(now, self.value)
        for old in sorted(spent, key=int)[:-32]:  # far more than any keep_checkpoints
            del spent[old]
        data["budget_minutes"] = self.budget / 60
        atomic.write_json(self.path, data)


def _read(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        log.warning("%s: unreadable; the budget counts from this restart", path)
        return {}
    return data if isinstance(data, dict) else {}
