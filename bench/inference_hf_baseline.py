"""The jobs of `bert-jax embed`, `predict` and `fill-mask` on a text file, done with transformers +
PyTorch as a typical user would: the reference bench/bench_inference.py times ours against.

Texts in input order, batches of --batch-size, each padded to its longest row (the tokenizer's
padding=True, truncation to --max-seq-length), no_grad, eager. embed: mean pooling over the real
tokens → .npy. predict: softmax of a BertForSequenceClassification → .npy. fill-mask: the MLM
head at the [MASK] positions only (gathered before the vocabulary projection, as ours; a
pipeline("fill-mask") would project every position), top-k → jsonl.

    python bench/inference_hf_baseline.py {embed,predict,fill-mask} MODEL_DIR TEXTS.txt OUT
        [--batch-size 32] [--max-seq-length 128] [--top-k 5] [--threads N]
"""

import argparse
import json
import os

import numpy as np
import torch
import transformers


def batches(texts, tok, batch_size, max_length):
    for start in range(0, len(texts), batch_size):
        yield tok(texts[start:start + batch_size], padding=True, truncation=True,
                  max_length=max_length, return_tensors="pt")


def embed(args, texts, tok):
    model = transformers.BertModel.from_pretrained(args.model_dir).eval()
    out = []
    for enc in batches(texts, tok, args.batch_size, args.max_seq_length):
        seq = model(**enc).last_hidden_state
        m = enc["attention_mask"][..., None].float()
        out.append(((seq * m).sum(1) / m.sum(1).clamp(min=1e-9)).numpy())
    np.save(args.output, np.concatenate(out))


def predict(args, texts, tok):
    model = transformers.BertForSequenceClassification.from_pretrained(args.model_dir).eval()
    out = [torch.softmax(model(**enc).logits, -1).numpy()
           for enc in batches(texts, tok, args.batch_size, args.max_seq_length)]
    np.save(args.output, np.concatenate(out))


def fill_mask(args, texts, tok):
    model = transformers.BertForMaskedLM.from_pretrained(args.model_dir).eval()
    with open(args.output, "w", encoding="utf-8") as f:
        for enc in batches(texts, tok, args.batch_size, args.max_seq_length):
            hidden = model.bert(**enc).last_hidden_state
            rows, cols = (enc["input_ids"] == tok.mask_token_id).nonzero(as_tuple=True)
            probs = torch.softmax(model.cls(hidden[rows, cols]), -1)
            top = torch.topk(probs, args.top_k)
            masks = [[] for _ in range(len(enc["input_ids"]))]
            for r, p, i in zip(rows.tolist(), top.values.tolist(), top.indices.tolist()):
                masks[r].append([{"token": t, "probability": q}
                                 for t, q in zip(tok.convert_ids_to_tokens(i), p)])
            for m in masks:
                f.write(json.dumps({"masks": m}, ensure_ascii=False) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("job", choices=("embed", "predict", "fill-mask"))
    p.add_argument("model_dir")
    p.add_argument("input", help="one text a line")
    p.add_argument("output")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.input, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    tok = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    with torch.no_grad():
        {"embed": embed, "predict": predict, "fill-mask": fill_mask}[args.job](args, texts, tok)


if __name__ == "__main__":
    main()
