"""Using a model: class probabilities per row, fill-mask top-k, sentence embeddings.

Every entry point takes a model path `load_pretrained` reads (our model dir, a Hugging Face dir,
a pretraining workdir) or a fine-tuning workdir (its best model, WORKDIR/model).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax import batches, pretrained, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.heads import BertForMaskedLM, BertForSequenceClassification
from bert_jax.model import BertModel


def resolve(path: str) -> str:
    """A fine-tuning workdir means its best model; anything else is used as given."""
    best = os.path.join(path, "model")
    return best if pretrained.is_model_dir(best) else path


def load(path: str):
    """(config, params, tokenizer) of a model directory."""
    path = resolve(path)
    config, params = pretrained.load_pretrained(path)
    vocab = os.path.join(path, "vocab")
    return config, params, tokenizer.load(vocab if os.path.isdir(vocab) else path)


def _run_batched(fn, arrays: dict, batch_size: int) -> np.ndarray:
    """fn(batch) over every row in fixed-shape batches; padded rows dropped."""
    return np.concatenate([np.asarray(fn(b))[:n] for b, n in batches.eval_batches(arrays,
                                                                                   batch_size)])


def predict_proba(config, params, tok, texts: Sequence[str], pairs: Optional[Sequence[str]] = None,
                  max_length: int = 128, batch_size: int = 32) -> np.ndarray:
    """(N, num_labels) class probabilities of a BertForSequenceClassification."""
    if "classifier" not in params:
        raise BertJaxError("model: has no classifier head (fine-tune it first with "
                           "`bert-jax finetune`)")
    model = BertForSequenceClassification(config)
    arrays = tokenizer.encode_batch(tok, texts, pairs, max_length, pad=True)
    apply = jax.jit(lambda b: jax.nn.softmax(model.apply(
        {"params": params}, b["input_ids"], b["token_type_ids"], b["attention_mask"]), -1))
    return _run_batched(apply, arrays, batch_size)


def fill_mask(config, params, tok, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each [MASK] in `text`, the top_k (token, probability) of the MLM head."""
    if "predictions" not in params:
        raise BertJaxError("model: has no masked-LM head (a BertModel such as all-MiniLM-L6-v2 "
                           "cannot fill masks; use a BertForPreTraining / BertForMaskedLM)")
    if top_k < 1:
        raise BertJaxError(f"--top-k: expected an integer ≥ 1, got {top_k}")
    enc = tokenizer.encode(tok, text, max_length=config.max_position_embeddings)
    ids = np.asarray([enc["input_ids"]], np.int32)
    positions = np.flatnonzero(ids[0] == tok.token_to_id("[MASK]"))
    if positions.size == 0:
        raise BertJaxError(f"text: has no [MASK] token: {text!r}")
    logits = BertForMaskedLM(config).apply(
        {"params": {"bert": params["bert"], "predictions": params["predictions"]}}, ids,
        np.asarray([enc["token_type_ids"]], np.int32), np.ones_like(ids), positions[None])
    probs = np.asarray(jax.nn.softmax(logits[0], -1))  # (P, V)
    out = []
    for row in probs:
        top = np.argsort(-row, kind="stable")[:top_k]
        out.append([(tok.id_to_token(int(i)), float(row[i])) for i in top])
    return out


def embed(config, params, tok, texts: Sequence[str], pooling: str = "cls", max_length: int = 128,
          batch_size: int = 32, normalize: bool = False) -> np.ndarray:
    """(N, H) float32 sentence embeddings: the last layer's [CLS] vector or the mean of its
    real (non-padding) tokens, as sentence-transformers' mean pooling."""
    if pooling not in ("cls", "mean"):
        raise BertJaxError(f"--pooling: expected cls or mean, got {pooling!r}")
    model = BertModel(config)
    arrays = tokenizer.encode_batch(tok, texts, None, max_length, pad=True)

    @jax.jit
    def apply(b):
        seq, _ = model.apply({"params": params["bert"]}, b["input_ids"], b["token_type_ids"],
                             b["attention_mask"])  # (B, L, H)
        if pooling == "cls":
            out = seq[:, 0]
        else:
            m = b["attention_mask"][..., None].astype(jnp.float32)
            out = (seq * m).sum(1) / jnp.maximum(m.sum(1), 1e-9)
        if normalize:
            out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out

    return _run_batched(apply, arrays, batch_size).astype(np.float32)
