"""Where metrics go: WORKDIR/metrics.jsonl, TensorBoard event files, and the console log."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time

import numpy as np
from flax import traverse_util

from bert_jax.model_files import paths

log = logging.getLogger("bert_jax")


class MetricWriter:
    """Appends one JSON line per (step, split) and mirrors scalars to TensorBoard.

    Only process 0 writes; other processes get a writer that does nothing.
    """

    def __init__(self, workdir: str, enabled: bool = True):
        self.enabled = enabled
        self.path = os.path.join(workdir, paths.METRICS_LOG)
        self.tb = None
        if enabled:
            self.tb = _summary_writer()(os.path.join(workdir, paths.TENSORBOARD))

    def write(self, step: int, split: str, values: dict[str, float]) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), "split": split, "time": round(time.time(), 3)}
        record.update({k: _json_number(v) for k, v in values.items()})
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        for k, v in values.items():
            self.tb.add_scalar(f"{split}/{k}", float(v), int(step))
        self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _summary_writer():
    """tensorboardX's SummaryWriter, imported without torch.

    tensorboardX's writer imports torch at module level when it is installed (the test and
    convert extras install it), only to name a type in its annotations: 1.5 s of every run's
    start, and a GB of torch in a JAX process. Scalars need none of it, so the import runs with
    torch hidden unless something already loaded it.
    """
    if "torch" in sys.modules:
        from tensorboardX import SummaryWriter
        return SummaryWriter
    sys.modules["torch"] = None  # `import torch` raises ImportError, which tensorboardX expects
    try:
        from tensorboardX import SummaryWriter
    finally:
        del sys.modules["torch"]
    return SummaryWriter


def _json_number(v):
    v = float(v)
    return v if math.isfinite(v) else str(v)  # JSON has no NaN/Inf


def read_metrics(workdir: str) -> list[dict]:
    path = os.path.join(workdir, paths.METRICS_LOG)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def parameter_table(params, depth: int = 3) -> str:
    """Parameter counts grouped by the first `depth` path components, then the total."""
    groups: dict[str, list] = {}
    for path, leaf in traverse_util.flatten_dict(params).items():
        key = "/".join(path[:depth])
        entry = groups.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += int(np.prod(leaf.shape))
    width = max(len(k) for k in groups)
    lines = [f"{'parameters':<{width}}  {'arrays':>6}  {'count':>12}"]
    lines += [f"{k:<{width}}  {n:>6}  {c:>12,}" for k, (n, c) in sorted(groups.items())]
    total = sum(c for _, c in groups.values())
    lines.append(f"{'total':<{width}}  {sum(n for n, _ in groups.values()):>6}  {total:>12,}")
    return "\n".join(lines)
