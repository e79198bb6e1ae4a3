"""Fine-tuning step speed per task: our jitted step vs Hugging Face PyTorch (eager), same batch.

For sequence classification, token classification and question answering: the task model of
the config (default: all-MiniLM-L6-v2's shape, random weights), one training step (forward,
backward, AdamW update, dropout on) on the same (B, L) batch, measured A B A B after warm-up,
medians reported. Our step is the one `bert-jax finetune` runs (training/steps.py with the
task's loss, jitted as training/run.jit_train_step does).

  python bench/bench_finetune_step.py [--tasks sequence,token,span] [--batch 32] [--seq 128]
                                      [--steps 7] [--padding 0.0]

--padding P makes the last P of every row padding (attention_mask 0): CoNLL sentences at 128
tokens are ~85% padding, and both frameworks compute on padded positions alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess

import numpy as np

from bench_pretrain import alternate  # bench/ is on sys.path (bench_common.py)

_MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
               intermediate_size=1536, max_position_embeddings=512)
_OURS = {"sequence": "BertForSequenceClassification", "token": "BertForTokenClassification",
         "span": "BertForQuestionAnswering"}


def make_batch(task: str, batch: int, seq: int, padding: float, labels: int, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    real = max(3, int(round(seq * (1 - padding))))
    ids = rng.integers(1000, 30000, (batch, seq)).astype(np.int32)
    mask = np.zeros_like(ids)
    mask[:, :real] = 1
    ids[:, 0], ids[:, real - 1] = 101, 102
    ids[mask == 0] = 0
    out = {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "attention_mask": mask}
    if task == "sequence":
        out["labels"] = rng.integers(0, labels, batch).astype(np.int32)
    elif task == "token":
        tags = rng.integers(0, labels, (batch, seq)).astype(np.int32)
        tags[mask == 0] = -100
        tags[:, 0] = -100
        out["labels"] = tags
    else:
        out["start_positions"] = rng.integers(1, real - 1, batch).astype(np.int32)
        out["end_positions"] = np.minimum(out["start_positions"] + 3, real - 2).astype(np.int32)
    return out


class Ours:
    def __init__(self, task: str, config, batch: dict):
        import jax
        import jax.numpy as jnp

        from bert_jax.models import task_models
        from bert_jax.runtime import xla_options
        from bert_jax.training import optim, steps
        from bert_jax.training.finetune_config import FinetuneConfig, optimizer_settings
        settings = optimizer_settings(FinetuneConfig(learning_rate=1e-4), 1000)
        schedule = optim.learning_rate_schedule(1e-4, 100, 1000)
        model = task_models.ARCHITECTURES[_OURS[task]][0](config, jnp.float32)
        tx = optim.make_optimizer(settings, schedule)

        def init(key):
            params = model.init(key, batch["input_ids"][:1])["params"]
            return steps.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

        from bert_jax import tasks
        loss = {"sequence": tasks.classification.loss, "token": tasks.token_classification.loss,
                "span": tasks.question_answering.loss}[task]
        self.state = jax.jit(init)(jax.random.key(0))
        self.batch = {k: jax.device_put(v) for k, v in batch.items()}
        self.key = jax.random.key(1)
        self.step = jax.jit(steps.make_finetune_step(schedule, loss), donate_argnums=(0,),
                            compiler_options=xla_options.train_step(False, "float32")).lower(
            self.state, self.batch, self.key).compile()

    def __call__(self):
        import jax
        self.state, metrics = self.step(self.state, self.batch, self.key)
        jax.block_until_ready(metrics)


class Theirs:
    def __init__(self, task: str, config, batch: dict):
        import torch
        import transformers
        torch.manual_seed(0)
        fields = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")}
        hf_config = transformers.BertConfig(**fields, num_labels=config.num_labels)
        self.model = getattr(transformers, _OURS[task])(hf_config).train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, eps=1e-6,
                                     weight_decay=0.01)
        self.inputs = {k: torch.from_numpy(v.astype(np.int64)) for k, v in batch.items()}

    def __call__(self):
        loss = self.model(**self.inputs).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", default="sequence,token,span")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--padding", type=float, default=0.0)
    args = p.parse_args()
    import jax
    import torch
    import transformers

    from bert_jax.models.config import BertConfig
    torch.set_num_threads(os.cpu_count() or 1)
    flags = subprocess.run("lscpu | grep -io 'avx512f\\|avx2\\|amx_tile' | sort -u | tr '\\n' ' '",
                           shell=True, capture_output=True, text=True).stdout.strip()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, flags: "
          f"{flags}; jax {jax.__version__}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}; batch {args.batch} × seq {args.seq}, padding "
          f"{args.padding:.0%}, float32")
    print("| task | ours s/step | HF s/step | ours / HF speed |")
    print("|---|---|---|---|")
    for task in args.tasks.split(","):
        labels = 9 if task == "token" else 2
        config = BertConfig(**_MINILM, id2label=tuple(f"L{i}" for i in range(labels)))
        batch = make_batch(task, args.batch, args.seq, args.padding, labels)
        ours, theirs = Ours(task, config, batch), Theirs(task, config, batch)
        a, b = alternate(ours, theirs, args.steps)
        print(f"| {task} | {a:.3f} | {b:.3f} | {b / a:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
