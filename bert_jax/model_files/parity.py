"""Parity of our model with transformers' on one checkpoint and one batch (needs torch).

The batch has padded rows and both segments, so a mistake in masking or segment handling shows.
"""

from __future__ import annotations

import numpy as np

from bert_jax.model_files.huggingface import load_hf, named_architecture
from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel
from bert_jax.models.task_models import architecture_of, model_for_params


def parity_batch(config: BertConfig, batch_size: int = 3, seq_len: int = 13,
                 num_masked: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    """Random ids; row b has a length that shrinks with b; segment B starts mid-row."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(0, config.vocab_size, (batch_size, seq_len))
    lengths = [max(2, seq_len - (b * seq_len) // (batch_size + 1)) for b in range(batch_size)]
    attention_mask = np.zeros((batch_size, seq_len), np.int64)
    token_type_ids = np.zeros((batch_size, seq_len), np.int64)
    positions = np.zeros((batch_size, num_masked), np.int64)
    for b, n in enumerate(lengths):
        attention_mask[b, :n] = 1
        input_ids[b, n:] = config.pad_token_id
        if config.type_vocab_size > 1:
            token_type_ids[b, n // 2:n] = 1
        positions[b] = np.sort(rng.choice(n, num_masked, replace=num_masked > n))
    return {"input_ids": input_ids, "token_type_ids": token_type_ids,
            "attention_mask": attention_mask, "masked_lm_positions": positions}


def compare(hf_dir: str, dtype: str = "float32", batch_size: int = 3, seq_len: int = 13,
            seed: int = 0) -> dict[str, float]:
    """Max |ours − transformers| of every output the checkpoint has, plus argmax agreement."""
    try:
        import torch
        import transformers
    except ImportError as e:
        raise BertJaxError(f"parity needs torch and transformers ({e.name} is missing): "
                           f"pip install 'bert-jax[convert]'") from None
    import jax.numpy as jnp

    config, params = load_hf(hf_dir)
    architecture = architecture_of(params, config, named_architecture(hf_dir))
    if batch_size < 1 or seq_len < 2 or seq_len > config.max_position_embeddings:
        raise BertJaxError(f"parity: need batch size ≥ 1 and 2 ≤ sequence length ≤ "
                           f"{config.max_position_embeddings}, got {batch_size} × {seq_len}")
    batch = parity_batch(config, batch_size, seq_len, seed=seed)
    hf = getattr(transformers, architecture).from_pretrained(
        hf_dir, attn_implementation="eager").eval()
    inputs = {k: torch.from_numpy(np.asarray(batch[k], np.int64))
              for k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        ref = hf(**inputs)
        ref_bert = ref if architecture == "BertModel" else hf.bert(**inputs)
    compute = jnp.dtype(dtype)
    seq, pooled = _forward(BertModel(config, compute))({"params": params["bert"]},
                                                       **inputs_np(batch))
    report = {"sequence_output": _maxdiff(seq, ref_bert.last_hidden_state)}
    if ref_bert.pooler_output is not None:
        report["pooled_output"] = _maxdiff(pooled, ref_bert.pooler_output)
    positions = np.asarray(batch["masked_lm_positions"])
    module = model_for_params(config, params, compute, architecture)
    if architecture in ("BertForPreTraining", "BertForMaskedLM"):
        out = _forward(module)({"params": params}, **inputs_np(batch),
                               masked_lm_positions=positions)
        mlm = out[0] if architecture == "BertForPreTraining" else out
        ref_mlm = ref.prediction_logits if architecture == "BertForPreTraining" else ref.logits
        ref_mlm = np.take_along_axis(ref_mlm.numpy(), positions[..., None], axis=1)
        report["mlm_logits"] = _maxdiff(mlm, ref_mlm)
        report["mlm_argmax_agreement"] = _agreement(mlm, ref_mlm)
        if architecture == "BertForPreTraining":
            report["nsp_logits"] = _maxdiff(out[1], ref.seq_relationship_logits)
            report["nsp_argmax_agreement"] = _agreement(out[1], ref.seq_relationship_logits)
    elif architecture == "BertForSequenceClassification":
        logits = _forward(module)({"params": params}, **inputs_np(batch))
        report["classifier_logits"] = _maxdiff(logits, ref.logits)
        report["classifier_argmax_agreement"] = _agreement(logits, ref.logits)
    return report


def _forward(module):
    """module.apply compiled as one program: run eagerly, each of its ~100 operations is
    compiled on its own (test_convert + test_cli_conversion: 41 s instead of 52, 2 cores)."""
    import jax
    return jax.jit(module.apply)


def inputs_np(batch) -> dict[str, np.ndarray]:
    return {k: np.asarray(batch[k], np.int32)
            for k in ("input_ids", "token_type_ids", "attention_mask")}


def _np(x) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def _maxdiff(ours, ref) -> float:
    return float(np.max(np.abs(np.asarray(ours, np.float32) - _np(ref).astype(np.float32))))


def _agreement(ours, ref) -> float:
    return float(np.mean(np.argmax(np.asarray(ours), -1) == np.argmax(_np(ref), -1)))
