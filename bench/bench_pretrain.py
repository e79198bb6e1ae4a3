"""Pretraining step speed: our jitted JAX step vs Hugging Face PyTorch BertForPreTraining (eager).

One process, same config, same batch shape, same number of masked tokens, AdamW, forward +
backward + update, dropout on (a real training step). After warm-up the two alternate A B A B
and we report medians. MFU counts only the work BERT needs (the vocabulary projection at the
masked positions only) against the matmul ceiling of the compute dtype measured in the same run.
Peak memory comes from separate child processes (one framework each): the peak resident set
over model creation, compilation and three steps, minus the peak after the imports.

--dtype bfloat16: our model computes matmuls in bfloat16, Hugging Face runs under
torch.autocast(bfloat16); the ceiling is then the faster of a bfloat16 matmul in JAX (float32
accumulation) and in torch. --remat: our remat=True against HF's gradient checkpointing.

  python bench/bench_pretrain.py [--sizes tiny,mini,small,base] [--steps 7] [--write]
                                 [--seq 128] [--dtype float32|bfloat16] [--remat]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

SEQ, MASKED = 128, 20  # paper phase 1: 20 predictions at length 128
BATCH = {"tiny": 32, "mini": 32, "small": 32, "medium": 32, "base": 8, "large": 8}


def masked_for(seq: int) -> int:
    """Predictions per sequence: the paper's 20 at 128 and 80 at 512, else 15% of the tokens."""
    return {128: 20, 512: 80}.get(seq, round(0.15 * seq))


def model_flops_per_step(config, batch: int, seq: int, masked: int) -> float:
    """Training FLOPs (3× forward) of BERT with the MLM projection on masked positions only."""
    H, I, V, L = (config.hidden_size, config.intermediate_size, config.vocab_size,
                  config.num_hidden_layers)
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq * H)  # dense + QKᵀ and AV
    forward = batch * seq * per_token + batch * masked * (2 * H * H + 2 * H * V) \
        + batch * (2 * H * H + 2 * H * 2)  # MLM transform + decoder, pooler + NSP
    return 3.0 * forward


def matmul_ceiling(n: int = 2048, repeats: int = 7, dtype: str = "float32") -> float:
    """FLOP/s of a large matmul in `dtype`: what this CPU can do at best.

    float32: a jitted JAX matmul. bfloat16: the faster of JAX (float32 accumulation, XLA's fast
    path on CPU) and torch.
    """
    import jax
    import jax.numpy as jnp
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
    if dtype == "float32":
        f = jax.jit(lambda x, y: x @ y)
    else:
        f = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    rate = 2 * n ** 3 / _median_seconds(lambda: f(a, a).block_until_ready(), repeats)
    if dtype != "float32":
        import torch
        b = torch.randn(n, n).to(getattr(torch, dtype))
        rate = max(rate, 2 * n ** 3 / _median_seconds(lambda: b @ b, repeats))
    return rate


def _median_seconds(f, repeats: int) -> float:
    f()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_batch(config, batch: int, seq: int = SEQ, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config.vocab_size, (batch, seq)).astype(np.int32)
    ids[:, 0], ids[:, seq // 2], ids[:, -1] = 2, 3, 3  # [CLS] A [SEP] B [SEP]
    types = np.zeros_like(ids)
    types[:, seq // 2 + 1:] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": np.ones_like(ids),
            "next_sentence_labels": rng.integers(0, 2, batch).astype(np.int32)}


class Ours:
    """Our pretrain step: masking inside, MLM at masked positions, AdamW, donated state."""

    def __init__(self, config, batch, masked=MASKED, dtype="float32", remat=False):
        import jax
        import jax.numpy as jnp

        from bert_jax.data.masking import MaskingSpec
        from bert_jax.models.task_models import BertForPreTraining
        from bert_jax.runtime import xla_options
        from bert_jax.training import optim
        from bert_jax.training import steps as train_step
        from bert_jax.training.pretrain_config import PretrainConfig
        cfg = PretrainConfig(learning_rate=1e-4, warmup_steps=10, steps=1000)
        model = BertForPreTraining(config, jnp.dtype(dtype), remat=remat)
        tx = optim.make_optimizer(cfg)

        def init(key):  # params and optimiser state in jit, as training/run.init_state
            params = model.init(key, batch["input_ids"][:1])["params"]
            return train_step.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

        self.state = jax.jit(init)(jax.random.key(0))
        spec = MaskingSpec(vocab_size=config.vocab_size, mask_token_id=4,
                           never_mask_ids=(0, 2, 3), max_predictions_per_seq=masked)
        step = train_step.make_pretrain_step(spec, optim.learning_rate_schedule(1e-4, 10, 1000))
        self.batch = {k: jax.device_put(v) for k, v in batch.items()}
        self.key = jax.random.key(1)
        t = time.perf_counter()
        self.step = jax.jit(step, donate_argnums=(0,),
                            compiler_options=xla_options.train_step(remat, dtype)).lower(
            self.state, self.batch, self.key).compile()
        self.compile_seconds = time.perf_counter() - t

    def __call__(self):
        import jax
        self.state, metrics = self.step(self.state, self.batch, self.key)
        jax.block_until_ready(metrics)


class Theirs:
    """transformers BertForPreTraining, eager, torch AdamW; labels at the same count of tokens."""

    def __init__(self, config, batch, masked=MASKED, dtype="float32", remat=False):
        import torch
        import transformers
        torch.manual_seed(0)
        hf_config = transformers.BertConfig(**{k: v for k, v in config.to_dict().items()
                                               if k not in ("id2label", "label2id")})
        self.model = transformers.BertForPreTraining(hf_config).train()
        if remat:
            self.model.gradient_checkpointing_enable()
        self.autocast = dict(device_type="cpu", dtype=getattr(torch, dtype),
                             enabled=dtype != "float32")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6,
                                     weight_decay=0.01)
        rng = np.random.default_rng(1)
        labels = np.full(batch["input_ids"].shape, -100, np.int64)
        seq = labels.shape[1]
        for row in labels:
            row[rng.choice(np.arange(1, seq - 1), masked - 1, replace=False)] = 7
        self.inputs = {k: torch.from_numpy(batch[k].astype(np.int64))
                       for k in ("input_ids", "token_type_ids", "attention_mask")}
        self.inputs["labels"] = torch.from_numpy(labels)
        self.inputs["next_sentence_label"] = torch.from_numpy(
            batch["next_sentence_labels"].astype(np.int64))

    def __call__(self):
        import torch
        with torch.autocast(**self.autocast):
            loss = self.model(**self.inputs).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def infer_pair(config, batch, dtype="float32"):
    """Forward-only BertModel callables (ours jitted with the options our predict / embed use,
    theirs eager under no_grad, under torch.autocast in bfloat16)."""
    import jax
    import jax.numpy as jnp
    import torch
    import transformers

    from bert_jax.models.encoder import BertModel
    from bert_jax.runtime import xla_options
    model = BertModel(config, jnp.dtype(dtype))
    params = jax.jit(lambda k: model.init(k, batch["input_ids"][:1]))(jax.random.key(0))
    fwd = jax.jit(lambda p, b: model.apply(p, b["input_ids"], b["token_type_ids"],
                                           b["attention_mask"]),
                  compiler_options=xla_options.forward(dtype))
    jb = {k: jax.device_put(v) for k, v in batch.items()}
    hf = transformers.BertModel(transformers.BertConfig(**{
        k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")})).eval()
    tb = {k: torch.from_numpy(batch[k].astype(np.int64))
          for k in ("input_ids", "token_type_ids", "attention_mask")}

    def theirs():
        with torch.no_grad(), torch.autocast("cpu", getattr(torch, dtype),
                                             enabled=dtype != "float32"):
            hf(**tb)

    return (lambda: jax.block_until_ready(fwd(params, jb))), theirs


def alternate(a, b, steps: int, warmup: int = 2) -> tuple[float, float]:
    """Median seconds per call of a and b, measured A B A B after warm-up."""
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for _ in range(steps):
        for f, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def peak_memory_mb(size: str, which: str, args) -> float:
    """Peak-RSS growth from creating the model to three training steps, in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--memory-child", size, which,
                          "--seq", str(args.seq), "--dtype", args.dtype]
                         + ["--remat"] * args.remat, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _memory_child(size: str, which: str, args) -> None:
    import jax  # noqa: F401  (imports count as baseline, not as the model's memory)
    import torch  # noqa: F401
    import transformers  # noqa: F401

    from bert_jax.models.config import BertConfig
    from bert_jax.training import steps  # noqa: F401
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak: a forked child inherits
        f.write("5")                                # its parent's, so ru_maxrss would mislead
    before = _peak_rss_kb()
    config = BertConfig.preset(size)
    runner = (Ours if which == "ours" else Theirs)(
        config, make_batch(config, BATCH[size], args.seq), masked_for(args.seq), args.dtype,
        args.remat)
    for _ in range(3):
        runner()
    print((_peak_rss_kb() - before) / 1024)


def _peak_rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="tiny,mini,small,base")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="add the table to RESULTS.md's history")
    parser.add_argument("--seq", type=int, default=SEQ, help="sequence length")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--remat", action="store_true", help="ours remat=True, HF checkpointing")
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        return _memory_child(*args.memory_child, args)
    import jax
    import torch
    import transformers

    from bert_jax.models.config import BertConfig
    torch.set_num_threads(os.cpu_count())
    ceiling = matmul_ceiling(dtype=args.dtype)
    seq, masked = args.seq, masked_for(args.seq)
    rows = []
    for size in args.sizes.split(","):
        config, batch_size = BertConfig.preset(size), BATCH[size]
        batch = make_batch(config, batch_size, seq)
        ours = Ours(config, batch, masked, args.dtype, args.remat)
        theirs = Theirs(config, batch, masked, args.dtype, args.remat)
        t_ours, t_theirs = alternate(ours, theirs, args.steps)
        i_ours, i_theirs = alternate(*infer_pair(config, batch, args.dtype), args.steps)
        tokens = batch_size * seq
        flops = model_flops_per_step(config, batch_size, seq, masked)
        rows.append(dict(
            size=size, batch=batch_size, ours_tok_s=tokens / t_ours,
            hf_tok_s=tokens / t_theirs, ratio=t_theirs / t_ours,
            mfu=flops / t_ours / ceiling, hf_mfu=flops / t_theirs / ceiling,
            compile_s=ours.compile_seconds, infer_ratio=i_theirs / i_ours,
            infer_ours_tok_s=tokens / i_ours, infer_hf_tok_s=tokens / i_theirs,
            mem_ours=peak_memory_mb(size, "ours", args), mem_hf=peak_memory_mb(size, "hf", args)))
        print(json.dumps(rows[-1]), flush=True)
    table = format_table(rows, ceiling, jax.__version__, torch.__version__,
                         transformers.__version__, args)
    print(table)
    if args.write:  # at the top of RESULTS.md's history, with the machine it ran on
        import results_page
        from bert_jax.runtime import environment
        results_page.add_section(table + "\n\n" + environment.markdown(environment.record()))


def format_table(rows, ceiling, jax_v, torch_v, tf_v, args) -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    head = (f"### Pretraining step, CPU — {datetime.date.today()}\n\n"
            f"{cpu}, {os.cpu_count()} cores; jax {jax_v}, torch {torch_v}, transformers "
            f"{tf_v}; {args.dtype}{'; remat (HF: gradient checkpointing)' * args.remat}; "
            f"seq {args.seq}, {masked_for(args.seq)} masked per sequence; medians of "
            f"{args.steps} alternating steps. {args.dtype} matmul ceiling "
            f"{ceiling / 1e9:.1f} GFLOP/s.\n\n"
            "| size | batch | ours tok/s | HF tok/s | ours/HF | MFU ours | MFU HF | compile s "
            "| peak MB ours | peak MB HF | inference ours/HF |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "\n".join(
        f"| {r['size']} | {r['batch']} | {r['ours_tok_s']:,.0f} | {r['hf_tok_s']:,.0f} | "
        f"{r['ratio']:.2f}× | {100 * r['mfu']:.0f}% | {100 * r['hf_mfu']:.0f}% | "
        f"{r['compile_s']:.1f} | {r['mem_ours']:.0f} | {r['mem_hf']:.0f} | "
        f"{r['infer_ratio']:.2f}× |" for r in rows)


if __name__ == "__main__":
    main()
