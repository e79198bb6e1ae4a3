"""What a pretraining run's minutes bought: held-out MLM accuracy and the downstream probe
(`config.probe_file`) against minutes, read from WORKDIR/metrics.jsonl.

    python bench/pretrain_curve.py WORKDIR [--out bench/pays/curve.png] [--label NAME]
        [--baseline MCC]   # e.g. the probe on random weights, drawn as a dotted line
        [--x steps]        # steps on the x axis: a run on a shared machine, whose minutes
                           # say more about the other jobs than about the run

Minutes count from the run's first record (the probe at step 0, written once the data are
prepared and the step compiled), so they are the training clock the time budget counts.
Prints the table it draws (minute, step, MLM accuracy, probe MCC per probe name).
"""

from __future__ import annotations

import argparse
import json
import os


def read_curve(workdir: str) -> dict:
    """{"eval": [(minutes, step, mlm_accuracy)], "probe": {name: [(minutes, step, mcc)]}}."""
    path = os.path.join(workdir, "metrics.jsonl")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise SystemExit(f"{path}: no records")
    start = rows[0]["time"]
    curve: dict = {"eval": [], "probe": {}}
    for row in rows:
        minutes = (row["time"] - start) / 60
        if row["split"] == "eval" and "mlm_accuracy" in row:
            curve["eval"].append((minutes, row["step"], row["mlm_accuracy"]))
        elif row["split"] == "probe":
            for name, value in row.items():
                if name not in ("step", "split", "time"):
                    curve["probe"].setdefault(name, []).append((minutes, row["step"], value))
    return curve


def table(curve: dict) -> str:
    names = sorted(curve["probe"])
    by_step: dict = {}
    for minutes, step, acc in curve["eval"]:
        by_step.setdefault(step, {"minutes": minutes})["mlm"] = acc
    for name in names:
        for minutes, step, mcc in curve["probe"][name]:
            by_step.setdefault(step, {"minutes": minutes})[name] = mcc
    head = ["minute", "step", "held-out MLM accuracy"] + [f"probe {n} (MCC ×100)" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for step in sorted(by_step):
        row = by_step[step]
        cells = [f"{row['minutes']:.1f}", f"{step:,}",
                 f"{row['mlm']:.3f}" if "mlm" in row else "—"]
        cells += [f"{100 * row[n]:.1f}" if n in row else "—" for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(curve: dict, path: str, label: str, baseline: float | None,
         x: str = "minutes") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, mlm = plt.subplots(figsize=(6.4, 3.6))
    probe = mlm.twinx()
    at = (lambda m, s: m) if x == "minutes" else (lambda m, s: s)
    if curve["eval"]:
        mlm.plot([at(m, s) for m, s, _ in curve["eval"]], [a for _, _, a in curve["eval"]],
                 "o-", color="tab:blue", label="held-out MLM accuracy")
    for name, points in sorted(curve["probe"].items()):
        probe.plot([at(m, s) for m, s, _ in points], [100 * v for _, _, v in points], "s--",
                   color="tab:orange", label=f"probe: {name} MCC ×100")
    if baseline is not None:
        probe.axhline(100 * baseline, color="tab:orange", linestyle=":",
                      label="probe on random weights")
    mlm.set_xlabel("minutes of training" if x == "minutes" else "steps")
    mlm.set_ylabel("held-out MLM accuracy", color="tab:blue")
    probe.set_ylabel("probe MCC ×100", color="tab:orange")
    top = max(probe.get_ylim()[1], 100 * baseline if baseline is not None else 0)
    probe.set_ylim(0, 1.15 * top)  # from zero: a few points of MCC look like a few points
    mlm.set_title(label)
    handles = mlm.get_legend_handles_labels()[0] + probe.get_legend_handles_labels()[0]
    mlm.legend(handles, [h.get_label() for h in handles], loc="lower right", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--out", default="bench/pays/curve.png")
    parser.add_argument("--label", default="")
    parser.add_argument("--baseline", type=float, default=None)
    parser.add_argument("--x", choices=("minutes", "steps"), default="minutes")
    args = parser.parse_args(argv)
    curve = read_curve(args.workdir)
    print(table(curve))
    plot(curve, args.out, args.label or args.workdir, args.baseline, args.x)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
