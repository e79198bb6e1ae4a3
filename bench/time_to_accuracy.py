"""Time to accuracy: held-out MLM accuracy against wall-clock minutes, ours and Hugging Face
PyTorch BertForPreTraining trained on one recipe, side by side.

    python bench/time_to_accuracy.py [--config configs/pretrain_tiny.py] [--config.FIELD=V ...]
        [--minutes 15] [--eval-every 60] [--frameworks ours,hf] [--out runs/tta] [--label L]
        [--target 0.25]
    python bench/time_to_accuracy.py --plot runs/tta/a.json runs/tta/b.json --out runs/tta

Both frameworks get the same model (the config's), the same initial weights (ours, converted),
the same vocabulary (config.vocab, or one trained once into OUT/vocab-SIZE), the same batches
(`PretrainingBatches.train_batch(step)`), the very same masks (ours drawn inside the step,
`steps.train_masks`; PyTorch is fed those arrays), the same rate at every step (the config's
schedule, or its time budget's) and AdamW with the same decay mask, epsilon and clipping, and
the same held-out rows masked once at 15% with `pretrain`'s own evaluation keys. Only dropout
masks differ. PyTorch runs eager, as transformers' BertForPreTraining computes (its MLM head
scores every position, which is what a transformers user runs).

The clock is each framework's training wall clock: compilation, batch building and the steps,
evaluations excluded (paused after the device is synchronised). Masking for PyTorch runs in
JAX outside its clock. Each framework runs in its own subprocess, one after the other, so
neither shares the cores with the other. Writes OUT/LABEL.json (both curves and the held-out
digest each side evaluated), OUT/LABEL.png and OUT/LABEL.md (the table).

`--target ACC` makes minutes to a held-out accuracy the headline: each framework stops at the
first evaluation that reaches ACC (or at --minutes, the config's steps or its budget), and the
table gives the minutes each needed, linear between evaluations ("—": not within the run).
With a time budget the rate still decays over the budget, so give the slower framework a
budget (and --minutes) long enough to get there: the comparison then holds where one budget
is not enough for one of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

MARKS = (2, 5, 10, 15)  # minutes the table reports
EVAL_BATCH = 32  # held-out masks are drawn per batch of this many rows, whatever the recipe's


# -- the shared setup ---------------------------------------------------------------------------

@dataclasses.dataclass
class Setup:
    parts: object  # the job's own PretrainParts (training/pretrain_parts.build)
    heldout: list  # masked held-out batches (numpy dicts, example_weights on padding rows)
    digest: str  # of every held-out array both sides evaluate

    cfg = property(lambda self: self.parts.cfg)  # PretrainConfig
    config = property(lambda self: self.parts.config)  # BertConfig


def load_config(path: str, overrides: list[str]):
    from bert_jax.training import pretrain_config
    return pretrain_config.load_config(path, overrides)


def vocabulary(cfg, out: str):
    """config.vocab, or a vocabulary of config.vocab_size trained once into OUT/vocab-SIZE."""
    from bert_jax.data import tokenizer
    if cfg.vocab:
        return tokenizer.load(cfg.vocab)
    directory = os.path.join(out, f"vocab-{cfg.vocab_size}")
    if os.path.isfile(os.path.join(directory, "tokenizer.json")):
        return tokenizer.load(os.path.join(directory, "tokenizer.json"))
    return tokenizer.train_tokenizer(cfg.train_files, cfg.vocab_size, directory,
                                     lowercase=cfg.lowercase)


def setup(cfg, out: str) -> Setup:
    """The job's own parts (model, optimiser, schedule, masks, step, batches: what `pretrain`
    runs) and the held-out rows masked once, as the job's evaluation masks them."""
    import jax

    from bert_jax.data import batches, masking
    from bert_jax.runtime import rng
    from bert_jax.training import pretrain_parts
    parts = pretrain_parts.build(cfg, vocabulary(cfg, out))
    rows = parts.heldout
    count = -(-len(rows["input_ids"]) // EVAL_BATCH)
    # pretrain's own held-out keys (at batch_size 32): the same masks for every recipe
    keys = rng.eval_keys(rng.run_key(cfg.seed), count)
    mask = jax.jit(lambda key, batch: masking.mask_batch(key, batch, parts.heldout_spec,
                                                         parts.lookup))
    heldout = []
    for key, (batch, n) in zip(keys, batches.eval_batches(rows, EVAL_BATCH)):
        masked = {k: np.asarray(v) for k, v in mask(key, batch).items()}
        masked["example_weights"] = (np.arange(EVAL_BATCH) < n).astype(np.float32)
        heldout.append(masked)
    return Setup(parts, heldout, digest(heldout))


def digest(batches: list) -> str:
    h = hashlib.blake2b(digest_size=12)
    for batch in batches:
        for name in sorted(batch):
            h.update(name.encode())
            h.update(np.ascontiguousarray(batch[name]).tobytes())
    return h.hexdigest()


class Stopwatch:
    """A training clock that pauses for evaluations; `share()` is the time budget's (phases)."""

    def __init__(self, budget_minutes: float, decay_share: float = 1.0):
        self.budget = budget_minutes * 60.0
        self.decay_share = decay_share
        self.spent, self.since = 0.0, None

    def start(self):
        self.since = time.perf_counter()

    def pause(self):
        self.spent += time.perf_counter() - self.since
        self.since = None

    def seconds(self) -> float:
        return self.spent + (time.perf_counter() - self.since if self.since is not None else 0.0)

    def share(self) -> float:
        return self.seconds() / self.budget if self.budget else 0.0


def budget_factor(clock: Stopwatch) -> float:
    """The time budget's factor on the step schedule's rate (1 without a budget)."""
    from bert_jax.training import optim
    return (optim.budget_scale(clock.seconds(), clock.budget, clock.decay_share)
            if clock.budget else 1.0)


def train(framework: str, s: Setup, minutes: float, eval_every: float,
          target: float = 0.0) -> dict:
    """Train for `minutes` of training clock (or cfg.steps, or the budget, whichever ends
    first, or until an evaluation reaches `target` accuracy when it is > 0), evaluating at 0
    and every `eval_every` seconds; returns the curve."""
    from bert_jax.training import pretrain_parts
    cfg = s.cfg
    clock = Stopwatch(cfg.time_budget_minutes, cfg.decay_share)
    phase = pretrain_parts.phase_of(cfg, clock if cfg.time_budget_minutes else None)
    trainer = (OursTrainer if framework == "ours" else TorchTrainer)(s)
    limit = minutes * 60.0
    if cfg.time_budget_minutes:
        limit = min(limit, cfg.time_budget_minutes * 60.0)
    points, next_eval, step = [], 0.0, 0

    def evaluate():
        trainer.sync()
        clock.pause()
        values = trainer.evaluate()
        points.append(dict(values, minutes=clock.seconds() / 60, step=step))
        print(f"{framework} {clock.seconds() / 60:6.2f} min step {step:6d}: "
              f"MLM accuracy {values['mlm_accuracy']:.4f} loss {values['mlm_loss']:.3f}"
              + (" neighbour attention " + " ".join(
                  f"{x:.2f}" for x in values["neighbour_attention"])
                 if "neighbour_attention" in values else "")
              + (" entropy " + " ".join(f"{x:.2f}" for x in values["attention_entropy"])
                 if "attention_entropy" in values else ""), flush=True)
        clock.start()

    clock.start()
    while True:
        if clock.seconds() >= next_eval:
            evaluate()
            next_eval += eval_every
        if clock.seconds() >= limit or step >= cfg.steps or (
                target and points[-1]["mlm_accuracy"] >= target):
            break
        batch = s.parts.train_batch(step, phase(step))
        factor = budget_factor(clock)
        clock.pause()  # PyTorch's masks are made by JAX: off its clock
        batch = trainer.prepare(step, batch)
        clock.start()
        trainer.step(step, batch, factor)
        step += 1
    trainer.sync()
    clock.pause()
    if points[-1]["step"] != step:
        clock.start()
        evaluate()
        clock.pause()
    return {"framework": framework, "points": points, "heldout_digest": digest(trainer.seen),
            "steps": step, "seconds": clock.seconds()}


class OursTrainer:
    """bert_jax's pretraining step: the job's own (training/pretrain_parts.build), on one
    device here."""

    def __init__(self, s: Setup):
        import jax
        import jax.numpy as jnp

        from bert_jax.runtime import rng, sharding, xla_options
        from bert_jax.training import steps
        parts, cfg = s.parts, s.cfg
        self.cfg = cfg
        self.jnp, self.jax, self.heldout, self.seen = jnp, jax, s.heldout, []
        # replicated over the mesh as the job's state is (run.init_state): a state on one
        # device is another input sharding, so the step would compile for it and again for
        # the replicated state its first call returns (and never share the job's executable)
        self.state = jax.device_put(
            steps.TrainState.create(apply_fn=parts.model.apply, params=initial_params(s),
                                    tx=parts.tx),
            sharding.replicated(sharding.make_mesh()))
        self.key = rng.run_key(cfg.seed)  # the job's run key
        self.budget = bool(cfg.time_budget_minutes)
        self.pending = None
        self.step_fn = parts.train_step
        nsp = cfg.objective == "mlm+nsp"
        self.eval_fn = jax.jit(
            lambda p, b: steps.pretraining_metrics(parts.model.apply, p, b, True, nsp=nsp),
            compiler_options=xla_options.forward())
        self.attention_fn = jax.jit(lambda p, b: attention_diagnostics(s.config, p, b))

    def prepare(self, step, batch):
        return batch  # masked inside the step, on the clock

    def step(self, step, batch, factor):
        args = (self.jnp.float32(factor),) if self.budget else ()
        self.state, metrics = self.step_fn(self.state, batch, self.key, *args)
        if self.pending is not None:  # one step in flight: the host builds the next batch
            self.jax.block_until_ready(self.pending)  # meanwhile, but the clock stays honest
        self.pending = metrics

    def sync(self):
        self.jax.block_until_ready(self.state)
        self.pending = None

    def evaluate(self) -> dict:
        from bert_jax.training import losses
        self.seen = self.heldout
        totals = None
        for batch in self.heldout:
            m = self.jax.device_get(self.eval_fn(self.state.params, batch))
            totals = m if totals is None else losses.add(totals, m)
        values = losses.means(totals)
        neighbours, entropy = self.jax.device_get(self.attention_fn(self.state.params,
                                                                    self.heldout[0]))
        values["neighbour_attention"] = [float(x) for x in neighbours]
        values["attention_entropy"] = [float(x) for x in entropy]
        return values


def attention_maps(config, params, batch):
    """Each layer's attention probabilities (B, N, L, L) on `batch`."""
    from bert_jax.models import BertModel
    return BertModel(config).apply({"params": params["bert"]}, batch["input_ids"],
                                   batch["token_type_ids"], batch["attention_mask"],
                                   output_attentions=True).attentions


def head_neighbour_mass(probs, mask):
    """(N,): each head's attention mass on a query's two neighbours (offsets ±1), averaged
    over the real queries; `probs` (B, N, L, L) one layer's attention, `mask` (B, L)."""
    import jax.numpy as jnp
    mask = mask.astype(jnp.float32)
    offsets = jnp.abs(jnp.arange(mask.shape[1])[:, None] - jnp.arange(mask.shape[1])[None])
    mass = (probs * (offsets == 1)).sum(-1)  # (B, N, L): each query's mass on its neighbours
    return (mass * mask[:, None]).sum((0, 2)) / mask.sum()


def head_entropy(probs, mask):
    """(N,): each head's attention entropy averaged over the real queries, as a share of the
    most it can be (log of the row's real length): 1 spread evenly, near 0 one key a query."""
    import jax.numpy as jnp
    mask = mask.astype(jnp.float32)
    most = jnp.log(jnp.maximum(mask.sum(-1), 2.0))[:, None, None]  # (B, 1, 1)
    entropy = -(probs * jnp.log(jnp.maximum(probs, 1e-30))).sum(-1) / most  # (B, N, L)
    return (entropy * mask[:, None]).sum((0, 2)) / mask.sum()


def attention_diagnostics(config, params, batch):
    """(neighbour attention, attention entropy), each (layers,), from one forward pass:
    per layer the most any head attends to the two neighbours (near 2/length while attention
    is spread evenly, towards 1 once a head reads the adjacent words) and the lowest entropy
    of its heads. Low entropy with low neighbour attention is how the plateau looks from
    inside: heads collapsed (Zhai et al., 2023) onto a few frequent words; off the plateau
    heads are sharp too, but on the neighbours."""
    import jax.numpy as jnp
    maps = attention_maps(config, params, batch)
    mask = batch["attention_mask"]
    return (jnp.stack([head_neighbour_mass(p, mask).max() for p in maps]),
            jnp.stack([head_entropy(p, mask).min() for p in maps]))


def neighbour_attention(config, params, batch):
    """Per layer, the most any head attends to a token's two neighbours (see above)."""
    return attention_diagnostics(config, params, batch)[0]


def attention_entropy(config, params, batch):
    """Per layer, the lowest of its heads' attention entropies (see above)."""
    return attention_diagnostics(config, params, batch)[1]


def initial_params(s: Setup):
    """The initial weights both frameworks start from: ours, from the run's init key, as
    `pretrain` makes them (position_init included)."""
    return s.parts.fresh_params()


class TorchTrainer:
    """transformers.BertForPreTraining, eager, fed our masked batches."""

    def __init__(self, s: Setup):
        import jax
        import torch
        import transformers

        from bert_jax.model_files.huggingface import save_hf
        from bert_jax.runtime import rng
        from bert_jax.training import steps
        cfg = self.cfg = s.cfg
        self.torch, self.heldout, self.seen = torch, s.heldout, []
        self.schedule = s.parts.schedule
        self.nsp = cfg.objective == "mlm+nsp"
        with tempfile.TemporaryDirectory() as tmp:
            save_hf(os.path.join(tmp, "m"), s.config, jax.device_get(initial_params(s)),
                    overwrite=True)
            self.model = transformers.BertForPreTraining.from_pretrained(
                os.path.join(tmp, "m"), attn_implementation="eager")
        if cfg.dtype != "float32":
            raise SystemExit("time_to_accuracy: the PyTorch loop runs float32 only")
        self.model.train()
        decay = [p for p in self.model.parameters() if p.ndim >= 2]
        rest = [p for p in self.model.parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay},
             {"params": rest, "weight_decay": 0.0}],
            lr=0.0, betas=(cfg.adam_b1, cfg.adam_b2), eps=cfg.adam_eps)
        spec, lookup = s.parts.spec, s.parts.lookup
        key = rng.run_key(cfg.seed)
        self.mask = jax.jit(lambda step, batch: steps.train_masks(key, step, batch, spec,
                                                                  lookup)[0])
        self.jax = jax

    def tensors(self, batch):
        t = self.torch
        ids = t.from_numpy(np.asarray(batch["input_ids"]).astype(np.int64))
        labels = np.full(ids.shape, -100, np.int64)
        rows, cols = np.nonzero(np.asarray(batch["masked_lm_weights"]) > 0)
        positions = np.asarray(batch["masked_lm_positions"])
        labels[rows, positions[rows, cols]] = np.asarray(batch["masked_lm_ids"])[rows, cols]
        return dict(input_ids=ids,
                    token_type_ids=t.from_numpy(np.asarray(batch["token_type_ids"])
                                                .astype(np.int64)),
                    attention_mask=t.from_numpy(np.asarray(batch["attention_mask"])
                                                .astype(np.int64))), t.from_numpy(labels)

    def prepare(self, step, batch):
        """The step's masked batch (the very masks ours draws) as tensors."""
        masked = self.jax.device_get(self.mask(step, batch))
        return (*self.tensors(masked), batch.get("next_sentence_labels"))

    def step(self, step, batch, factor):
        t = self.torch
        inputs, labels, nsp_labels = batch
        learning_rate = float(self.schedule(step)) * factor
        k = self.cfg.grad_accum_steps
        mlm_total = max(float((labels != -100).sum()), 1.0)
        if self.nsp:
            nsp_labels = t.from_numpy(np.asarray(nsp_labels).astype(np.int64))
        for j in range(k):
            rows = slice(j, None, k)
            out = self.model(**{n: v[rows] for n, v in inputs.items()})
            logits = out.prediction_logits
            loss = t.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels[rows].reshape(-1),
                ignore_index=-100, reduction="sum") / mlm_total
            if self.nsp:
                loss = loss + t.nn.functional.cross_entropy(
                    out.seq_relationship_logits, nsp_labels[rows],
                    reduction="sum") / labels.shape[0]
            loss.backward()
        t.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        for group in self.opt.param_groups:
            group["lr"] = learning_rate
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def sync(self):
        pass

    def evaluate(self) -> dict:
        t = self.torch
        self.seen = self.heldout
        self.model.eval()
        sums = dict(mlm_loss=0.0, mlm_accuracy=0.0, mlm=0.0, nsp_loss=0.0, nsp_accuracy=0.0,
                    nsp=0.0)
        with t.no_grad():
            for batch in self.heldout:
                inputs, _ = self.tensors(batch)
                out = self.model(**inputs)
                rows = t.from_numpy(np.array(batch["example_weights"]))
                pos = t.from_numpy(batch["masked_lm_positions"].astype(np.int64))
                w = t.from_numpy(np.array(batch["masked_lm_weights"])) * rows[:, None]
                logits = t.gather(out.prediction_logits, 1, pos[..., None].expand(
                    -1, -1, out.prediction_logits.shape[-1]))  # (B, P, V)
                target = t.from_numpy(batch["masked_lm_ids"].astype(np.int64))
                ce = t.nn.functional.cross_entropy(logits.transpose(1, 2), target,
                                                   reduction="none")
                sums["mlm_loss"] += float((ce * w).sum())
                sums["mlm_accuracy"] += float(((logits.argmax(-1) == target) * w).sum())
                sums["mlm"] += float(w.sum())
                if self.nsp:
                    labels = t.from_numpy(batch["next_sentence_labels"].astype(np.int64))
                    nsp = out.seq_relationship_logits
                    ce = t.nn.functional.cross_entropy(nsp, labels, reduction="none")
                    sums["nsp_loss"] += float((ce * rows).sum())
                    sums["nsp_accuracy"] += float(((nsp.argmax(-1) == labels) * rows).sum())
                    sums["nsp"] += float(rows.sum())
        self.model.train()
        values = {k: sums[k] / max(sums["mlm"], 1.0) for k in ("mlm_loss", "mlm_accuracy")}
        if self.nsp:
            values.update({k: sums[k] / max(sums["nsp"], 1.0)
                           for k in ("nsp_loss", "nsp_accuracy")})
        return values


# -- output ---------------------------------------------------------------------------------

def at_minutes(points: list, minutes: float):
    """Held-out MLM accuracy at `minutes`, linear between evaluations (None past the end)."""
    xs = [p["minutes"] for p in points]
    if minutes > xs[-1] + 1e-9:
        return None
    return float(np.interp(minutes, xs, [p["mlm_accuracy"] for p in points]))


def minutes_to(points: list, accuracy: float):
    """The first time the curve reaches `accuracy`, linear between evaluations (None: never)."""
    for a, b in zip(points, points[1:]):
        if b["mlm_accuracy"] >= accuracy:
            if a["mlm_accuracy"] >= accuracy:
                return a["minutes"]
            f = (accuracy - a["mlm_accuracy"]) / (b["mlm_accuracy"] - a["mlm_accuracy"])
            return a["minutes"] + f * (b["minutes"] - a["minutes"])
    return points[0]["minutes"] if points and points[0]["mlm_accuracy"] >= accuracy else None


def table(curves: list, reference: str = "", target: float = 0.0) -> str:
    """Markdown: accuracy at MARKS minutes, steps, minutes to reach the reference's final
    accuracy (the HF curve's, when there is one), and minutes to `target` (when > 0); under
    the table, the ratio of each curve's minutes to the target over the reference's."""
    ref = next((c for c in curves if c["label"] == reference), None) or next(
        (c for c in curves if c["framework"] == "hf"), None)
    marks = [m for m in MARKS if any(c["points"][-1]["minutes"] >= m - 0.05 for c in curves)]
    marks = marks or [MARKS[0]]
    head = ["run"] + [f"{m} min" for m in marks] + ["final", "steps", "minutes"]
    final = ref["points"][-1]["mlm_accuracy"] if ref else None
    if final is not None:
        head.append(f"min to {final:.3f} ({ref['label']})")
    if target:
        head.append(f"min to {target:.3f}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in curves:
        pts = c["points"]
        row = [c["label"]] + [_fmt(at_minutes(pts, m - 0.05 if m == marks[-1] else m))
                              for m in marks]
        row += [f"{pts[-1]['mlm_accuracy']:.3f}", str(c["steps"]), f"{c['seconds'] / 60:.1f}"]
        for goal in ([final] if final is not None else []) + ([target] if target else []):
            reach = minutes_to(pts, goal)
            row.append("—" if reach is None else f"{reach:.1f}")
        lines.append("| " + " | ".join(row) + " |")
    reach = {c["label"]: minutes_to(c["points"], target) for c in curves} if target else {}
    if ref and reach.get(ref["label"]):
        lines.append("")
        lines += [f"{label}: {m / reach[ref['label']]:.2f}× {ref['label']}'s minutes to "
                  f"{target:.3f}" for label, m in reach.items()
                  if m is not None and label != ref["label"]]
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def plot(curves: list, path: str, title: str = "") -> None:
    """Held-out MLM accuracy and loss against training minutes, every curve on one figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (acc, loss) = plt.subplots(1, 2, figsize=(11, 4))
    for c in curves:
        xs = [p["minutes"] for p in c["points"]]
        style = "--" if c["framework"] == "hf" else "-"
        acc.plot(xs, [p["mlm_accuracy"] for p in c["points"]], style, label=c["label"])
        loss.plot(xs, [p["mlm_loss"] for p in c["points"]], style, label=c["label"])
    acc.set(xlabel="training wall clock (minutes)", ylabel="held-out MLM accuracy (15% masked)")
    loss.set(xlabel="training wall clock (minutes)", ylabel="held-out MLM loss")
    for ax in (acc, loss):
        ax.grid(alpha=0.3)
    acc.legend(fontsize=8)
    if title:
        fig.suptitle(textwrap.fill(title, 150), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cpu_flags() -> str:
    """The CPU's vector extensions, written beside every figure."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown CPU flags"
    wanted = sorted(f for f in flags if f.startswith("avx512") or f in ("avx2", "amx_tile"))
    return f"{os.cpu_count()} cores, " + (" ".join(wanted) or "no AVX2")


# -- entry points ---------------------------------------------------------------------------

def worker(args) -> None:
    """One framework's run in this process; its curve as JSON into args.result."""
    cfg = load_config(args.config, args.overrides)
    s = setup(cfg, args.out)
    curve = train(args.worker, s, args.minutes, args.eval_every, args.target)
    curve["setup_digest"] = s.digest
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(curve, f)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/pretrain_tiny.py")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--eval-every", type=float, default=60.0, help="seconds of training")
    parser.add_argument("--frameworks", default="ours,hf")
    parser.add_argument("--out", default="runs/time_to_accuracy")
    parser.add_argument("--label", default="", help="the run's name (default: the overrides)")
    parser.add_argument("--target", type=float, default=0.0,
                        help="stop each framework at this held-out MLM accuracy; the table's "
                             "headline is the minutes each needed")
    parser.add_argument("--plot", nargs="*", help="only plot and tabulate these result JSONs")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    args.overrides = [a[len("--config."):] for a in rest if a.startswith("--config.")]
    unknown = [a for a in rest if not a.startswith("--config.")]
    if unknown:
        parser.error(f"unrecognised arguments: {' '.join(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    if args.worker:
        worker(args)
        return 0
    if args.plot is not None:
        results = [json.load(open(path, encoding="utf-8")) for path in args.plot]
        curves = [c for r in results for c in r["curves"]]
        write_outputs(curves, os.path.join(args.out, args.label or "compare"),
                      results[0].get("title", "") if len(results) == 1 else results[0]["cpu"],
                      args.target or results[0].get("target", 0.0))
        return 0
    label = args.label or (",".join(args.overrides) or "default")
    curves = []
    for framework in args.frameworks.split(","):
        result = os.path.join(args.out, f".{label}.{framework}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework,
               "--result", result, "--config", args.config, "--minutes", str(args.minutes),
               "--eval-every", str(args.eval_every), "--out", args.out,
               "--target", str(args.target),
               *[f"--config.{o}" for o in args.overrides]]
        subprocess.run(cmd, check=True)
        with open(result, encoding="utf-8") as f:
            curve = json.load(f)
        os.remove(result)
        curve["label"] = f"{'ours' if framework == 'ours' else 'HF PyTorch'} {label}"
        curves.append(curve)
    if len({c["heldout_digest"] for c in curves}) != 1:
        raise SystemExit("time_to_accuracy: the frameworks evaluated different held-out "
                         "batches: " + ", ".join(c["heldout_digest"] for c in curves))
    write_outputs(curves, os.path.join(args.out, _safe(label)),
                  f"{args.config} {' '.join(args.overrides)}; {cpu_flags()}", args.target)
    return 0


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in label)[:120]


def write_outputs(curves: list, stem: str, title: str, target: float = 0.0) -> None:
    from bert_jax.runtime import environment
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump({"title": title, "cpu": cpu_flags(), "curves": curves, "target": target},
                  f, indent=1)
    text = table(curves, target=target)
    with open(stem + ".md", "w", encoding="utf-8") as f:
        f.write(f"{title}\n\n{text}")
    plot(curves, stem + ".png", title)
    environment.write_beside(stem + ".png")  # the machine and versions behind the figure
    print(text)
    print(f"wrote {stem}.json, .md, .png and {environment.SUFFIX}")


if __name__ == "__main__":
    sys.exit(main())
