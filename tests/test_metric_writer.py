"""MetricWriter: what a run's metrics leave on disk, and what writing them costs at start-up."""

import glob
import json
import os
import subprocess
import sys

from bert_jax.runtime.metric_writer import MetricWriter, read_metrics

_CHILD = """
import importlib.util, json, sys
from bert_jax.runtime.metric_writer import MetricWriter
w = MetricWriter(sys.argv[1])
w.write(3, "train", {"loss": 1.5})
w.close()
print(json.dumps({"torch_installed": importlib.util.find_spec("torch") is not None,
                  "torch_loaded": "torch" in sys.modules}))
"""


def test_writing_metrics_does_not_import_torch(tmp_path):
    """tensorboardX imports torch when it can (1.5 s of every run's start); the writer hides it."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], check=True,
                         capture_output=True, text=True).stdout
    seen = json.loads(out.splitlines()[-1])
    assert seen == {"torch_installed": True, "torch_loaded": False}
    assert read_metrics(str(tmp_path))[0]["loss"] == 1.5
    assert glob.glob(os.path.join(tmp_path, "**", "events.out.tfevents.*"), recursive=True)


def test_metrics_file_and_non_finite_values(tmp_path):
    w = MetricWriter(str(tmp_path))
    w.write(1, "train", {"loss": 2.0, "grad_norm": float("nan")})
    w.write(2, "eval", {"mlm_accuracy": 0.25})
    w.close()
    rows = read_metrics(str(tmp_path))
    assert [(r["step"], r["split"]) for r in rows] == [(1, "train"), (2, "eval")]
    assert rows[0]["loss"] == 2.0 and rows[0]["grad_norm"] == "nan"
    assert rows[1]["mlm_accuracy"] == 0.25
    assert "torch" not in sys.modules or sys.modules["torch"] is not None  # never left hidden


def test_a_disabled_writer_writes_nothing(tmp_path):
    w = MetricWriter(str(tmp_path), enabled=False)
    w.write(1, "train", {"loss": 2.0})
    w.close()
    assert os.listdir(tmp_path) == []
