"""bench/pretrain_curve.py: minutes count from the run's first record; evaluations and probes
land on their steps; the picture is written."""

import json

from conftest import bench_module

curve_mod = bench_module("pretrain_curve")


def test_curve_reads_minutes_steps_mlm_and_every_probe(tmp_path):
    rows = [{"step": 0, "split": "probe", "time": 1000.0, "fine_foods": 0.2},
            {"step": 50, "split": "train", "time": 1010.0, "mlm_accuracy": 0.01},
            {"step": 100, "split": "eval", "time": 1060.0, "mlm_accuracy": 0.25},
            {"step": 100, "split": "probe", "time": 1066.0, "fine_foods": 0.3, "pos": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    curve = curve_mod.read_curve(str(tmp_path))
    assert curve["eval"] == [(1.0, 100, 0.25)]  # train rows are not the held-out curve
    assert curve["probe"] == {"fine_foods": [(0.0, 0, 0.2), (1.1, 100, 0.3)],
                              "pos": [(1.1, 100, 0.5)]}
    lines = curve_mod.table(curve).splitlines()
    assert lines[2] == "| 0.0 | 0 | — | 20.0 | — |"
    assert lines[3] == "| 1.0 | 100 | 0.250 | 30.0 | 50.0 |"
    curve_mod.plot(curve, str(tmp_path / "c.png"), "run", 0.19)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
