"""Where a pretraining step's time goes: ours (XLA ops) and transformers + PyTorch (aten ops).

Builds the same step as bench/bench_pretrain.py (same config, batch, masked count, AdamW),
warms both up, then profiles a few steps of each: ours with the JAX profiler (its Perfetto
trace: every XLA:CPU thunk and its wall time), theirs with torch.profiler (self CPU time of
each aten op). Each op is put in one class (matmul, reductions, element-wise, copies/layout,
optimizer, other) so the two libraries' steps read side by side on one CPU, and ours also by
part of the model (forward / backward × feed-forward, attention, LayerNorm, MLM head, loss…)
from the JAX op path XLA keeps in each op's metadata.

  python bench/profile_step.py [--size mini] [--steps 5] [--dtype float32|bfloat16] [--dropout P]
                               [--top 15] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile

import bench_pretrain as bp  # Ours, Theirs, make_batch, alternate: the same step


def hlo_opcodes(hlo_text: str) -> dict[str, str]:
    """Instruction name → a class, from the compiled module's HLO text.

    A fusion is classed by what it holds: a dot (matmul) first, then reduce (softmax and
    LayerNorm statistics), else element-wise. Names are those the profiler's thunks carry.
    """
    computations: dict[str, str] = {}  # computation name → its body
    name = None
    for line in hlo_text.splitlines():
        m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if m:
            name, computations[m.group(1)] = m.group(1), ""
        elif name is not None:
            computations[name] += line + "\n"
    classes = {}
    for body in computations.values():
        for line in body.splitlines():
            m = re.match(r"^\s*(?:ROOT )?%?([\w.\-]+) = [^ ]+ (\w[\w\-]*)\(", line)
            if not m:
                continue
            inst, opcode = m.groups()
            if opcode == "fusion":
                called = re.search(r"calls=%?([\w.\-]+)", line)
                inner = computations.get(called.group(1), "") if called else ""
                if re.search(r" (dot|convolution)\(", inner):
                    opcode = "fusion:dot"
                elif re.search(r" reduce\(", inner):
                    opcode = "fusion:reduce"
                else:
                    opcode = "fusion:elementwise"
            classes[inst] = opcode
    return classes


def hlo_op_names(hlo_text: str) -> dict[str, str]:
    """Instruction name → the JAX op path XLA keeps in its metadata (jit(f)/jvp(Model)/…)."""
    names = {}
    for line in hlo_text.splitlines():
        m = re.match(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*op_name=\"([^\"]*)\"", line)
        if m:
            names[m.group(1)] = m.group(2)
    return names


def region_ours(op_name: str) -> str:
    """Which part of the step an op belongs to, from its JAX op path: forward or backward
    (autodiff's transpose), and the module (attention's projections apart from its core)."""
    if not op_name:  # an op XLA made (a layout copy) without a JAX op behind it
        return "unattributed"
    if "jvp(" not in op_name:
        return "optimizer and update"
    way = "backward" if "transpose(jvp(" in op_name else "forward"
    path = op_name.split("BertForPreTraining)")[-1] if "BertForPreTraining)" in op_name else ""
    if not path:
        part = "loss"
    elif "layer_norm" in path:
        part = "LayerNorm"
    elif "embeddings" in path:
        part = "embeddings"
    elif re.search(r"attention/(query|key|value|output)/", path):
        part = "attention projections"
    elif "attention" in path:
        part = "attention scores, softmax, context"
    elif "feed_forward" in path:
        part = "feed-forward"
    elif "predictions" in path:
        part = "MLM head"
    else:
        part = "pooler, NSP head, other"
    return f"{way}: {part}"


def _class_ours(name: str, opcode: str) -> str:
    if opcode in ("dot", "fusion:dot", "custom-call") or "dot" in name:
        return "matmul"
    if opcode in ("copy", "transpose", "copy-start", "copy-done", "bitcast", "reshape",
                  "dynamic-update-slice", "slice", "concatenate", "pad"):
        return "copies / layout"
    if opcode in ("fusion:reduce", "reduce"):
        return "reductions (softmax, LayerNorm, losses)"
    if opcode in ("gather", "scatter", "fusion:elementwise", "select-and-scatter"):
        return "element-wise, gather / scatter"
    return "other"


def profile_ours(runner, steps: int) -> tuple[dict, dict, dict]:
    """ms a step by op name, by class and by region, from the JAX profiler's Perfetto trace."""
    import jax
    hlo = runner.step.as_text()
    classes, op_names = hlo_opcodes(hlo), hlo_op_names(hlo)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(steps):
                runner()
        path = glob.glob(os.path.join(tmp, "**", "perfetto_trace.json.gz"), recursive=True)[0]
        with gzip.open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    by_name: dict[str, float] = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("name") in classes:
            by_name[e["name"]] += e.get("dur", 0) / 1e3 / steps
    by_class: dict[str, float] = collections.Counter()
    by_region: dict[str, float] = collections.Counter()
    for name, ms in by_name.items():
        by_class[_class_ours(name, classes[name])] += ms
        by_region[region_ours(op_names.get(name, ""))] += ms
    return dict(by_name), dict(by_class), dict(by_region)


def _class_theirs(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("addmm", "aten::mm", "aten::bmm", "matmul", "linear", "baddbmm",
                            "scaled_dot_product", "_flash_attention", "_efficient_attention")):
        return "matmul"
    if any(k in n for k in ("copy_", "contiguous", "clone", "transpose", "permute", "view",
                            "reshape", "expand", "cat", "to_copy", "_to_copy")):
        return "copies / layout"
    if any(k in n for k in ("softmax", "layer_norm", "nll", "cross_entropy", "sum", "mean")):
        return "reductions (softmax, LayerNorm, losses)"
    if any(k in n for k in ("adam", "foreach", "_fused_adam", "lerp", "addcdiv", "addcmul",
                            "sqrt", "zero_")):
        return "optimizer"
    if any(k in n for k in ("gelu", "tanh", "dropout", "mul", "add", "div", "embedding",
                            "index", "where", "masked", "bernoulli", "fill")):
        return "element-wise, gather / scatter"
    return "other"


def profile_theirs(runner, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """ms a step by aten op (self CPU time, so nested ops are not counted twice) and class."""
    import torch.profiler
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner()
    by_name = {e.key: e.self_cpu_time_total / 1e3 / steps for e in prof.key_averages()
               if e.self_cpu_time_total > 0}
    by_class: dict[str, float] = collections.Counter()
    for name, ms in by_name.items():
        by_class[_class_theirs(name)] += ms
    return by_name, dict(by_class)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="mini")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--vocab-size", type=int, default=8192,
                        help="the default recipe's vocabulary (the presets' is 30,522)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="hidden and attention dropout (default: the preset's 0.1; the "
                             "default pretraining recipe uses 0)")
    parser.add_argument("--top", type=int, default=15, help="slowest ops listed per library")
    parser.add_argument("--json", help="write the per-op, per-class and per-part figures here")
    args = parser.parse_args()

    from bert_jax.models.config import BertConfig
    config = BertConfig.preset(args.size, vocab_size=args.vocab_size)
    if args.dropout is not None:
        config = config.replace(hidden_dropout_prob=args.dropout,
                                attention_probs_dropout_prob=args.dropout)
    batch = bp.make_batch(config, bp.BATCH[args.size])
    ours = bp.Ours(config, batch, bp.MASKED, args.dtype)
    theirs = bp.Theirs(config, batch, bp.MASKED, args.dtype)
    t_ours, t_theirs = bp.alternate(ours, theirs, args.steps)  # warm-up, and plain step times
    ours_ops, ours_cls, ours_regions = profile_ours(ours, args.steps)
    theirs_ops, theirs_cls = profile_theirs(theirs, args.steps)

    print(f"{args.size}, vocabulary {config.vocab_size}, dropout {config.hidden_dropout_prob}, "
          f"batch {bp.BATCH[args.size]} x {bp.SEQ}, {args.dtype}: step (median, unprofiled) "
          f"ours {t_ours * 1e3:.0f} ms, HF {t_theirs * 1e3:.0f} ms ({t_theirs / t_ours:.2f}x)")
    print("| class | ours ms | ours share | HF ms | HF share |\n|---|---|---|---|---|")
    total_o, total_t = sum(ours_cls.values()), sum(theirs_cls.values())
    for c in sorted(set(ours_cls) | set(theirs_cls),
                    key=lambda c: -(ours_cls.get(c, 0) + theirs_cls.get(c, 0))):
        o, t = ours_cls.get(c, 0.0), theirs_cls.get(c, 0.0)
        print(f"| {c} | {o:.1f} | {o / total_o:.0%} | {t:.1f} | {t / total_t:.0%} |")
    print(f"| **sum of ops** | {total_o:.1f} | | {total_t:.1f} | |")
    print("\n| ours, by part of the step | ms | share |\n|---|---|---|")
    for region, ms in sorted(ours_regions.items(), key=lambda kv: -kv[1]):
        print(f"| {region} | {ms:.1f} | {ms / total_o:.0%} |")
    for label, ops in (("ours", ours_ops), ("HF", theirs_ops)):
        print(f"\nslowest {label} ops (ms a step):")
        for name, ms in sorted(ops.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"  {ms:7.2f}  {name}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": args.size, "dtype": args.dtype, "step_ms": {
                "ours": t_ours * 1e3, "hf": t_theirs * 1e3},
                "ours": {"classes": ours_cls, "regions": ours_regions, "ops": ours_ops},
                "hf": {"classes": theirs_cls, "ops": theirs_ops}}, f, indent=1)
        from bert_jax.runtime import environment
        environment.write_beside(args.json)  # the machine and versions behind the figures


if __name__ == "__main__":
    main()
