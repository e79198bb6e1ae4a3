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


def test_the_curve_can_be_drawn_against_steps(tmp_path):
    """--x steps: a shared machine's minutes say more about the other jobs than the run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    curve = {"eval": [(3.0, 1000, 0.28), (9.0, 2000, 0.34)],
             "probe": {"fine_foods": [(0.0, 0, 0.19), (3.1, 1000, 0.18)]}}
    drawn = []
    real_savefig = plt.Figure.savefig

    def keep(fig, *a, **k):
        drawn.append([list(line.get_xdata()) for ax in fig.axes for line in ax.lines])
        return real_savefig(fig, *a, **k)
    plt.Figure.savefig = keep
    try:
        curve_mod.plot(curve, str(tmp_path / "s.png"), "run", None, x="steps")
    finally:
        plt.Figure.savefig = real_savefig
    assert drawn == [[[1000, 2000], [0, 1000]]]
