"""Task heads on BertModel: masked LM, next sentence, sequence classification.

Every model here keeps the encoder under `params["bert"]` and each head under its own top-level
key (`predictions`, `seq_relationship`, `classifier`), so one checkpoint serves every model that
shares those parts. Logits are returned in float32 whatever the computation dtype.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from bert_jax import matmul
from bert_jax.config import BertConfig
from bert_jax.model import (ACTIVATION_FNS, BertModel, Dense, dense, layer_norm, weight_init,
                            word_embeddings)


def gather_positions(sequence_output, positions):
    """(B, L, H) gathered at (B, P) positions → (B, P, H)."""
    return jnp.take_along_axis(sequence_output, positions[..., None].astype(jnp.int32), axis=1)


class MlmHead(nn.Module):
    """transform (dense + act + LayerNorm) → decoder (tied to the word embeddings) + own bias."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, hidden, embedding_table):
        cfg = self.config
        h = dense(cfg, cfg.hidden_size, self.dtype, "dense")(hidden)  # (B, P, H)
        h = ACTIVATION_FNS[cfg.hidden_act](h)
        h = layer_norm(cfg, "layer_norm")(h)
        if cfg.tie_word_embeddings:
            # as one (B·P, H) matrix, for the reason in model.Dense
            logits = matmul.einsum("th,vh->tv", h.reshape(-1, cfg.hidden_size),
                                   embedding_table, self.dtype
                                   ).reshape(*h.shape[:-1], cfg.vocab_size)  # (B, P, V)
        else:
            logits = Dense(cfg.vocab_size, use_bias=False, dtype=self.dtype,
                           kernel_init=weight_init(cfg), name="decoder")(h)  # (B, P, V)
        bias = self.param("bias", nn.initializers.zeros, (cfg.vocab_size,), jnp.float32)
        return logits.astype(jnp.float32) + bias


class NspHead(nn.Module):
    """Is-next / random-next logits from the pooled output: (B, H) → (B, 2)."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, pooled):
        kernel = self.param("kernel", weight_init(self.config), (self.config.hidden_size, 2))
        bias = self.param("bias", nn.initializers.zeros, (2,))
        return (pooled @ kernel.astype(self.dtype)).astype(jnp.float32) + bias


def _encode_and_predict(module, input_ids, token_type_ids, attention_mask, positions,
                        deterministic):
    """The encoder ("bert") and MLM head ("predictions") inside `module`'s compact call.

    Returns (mlm_logits (B, P, V), pooled_output (B, H)).
    """
    bert = BertModel(module.config, module.dtype, module.remat, name="bert")
    sequence_output, pooled = bert(input_ids, token_type_ids, attention_mask, deterministic)
    if positions is not None:
        sequence_output = gather_positions(sequence_output, positions)
    mlm_logits = MlmHead(module.config, module.dtype, name="predictions")(
        sequence_output, word_embeddings(bert))
    return mlm_logits, pooled


class BertForPreTraining(nn.Module):
    """BERT with its two pretraining heads.

    Returns (mlm_logits (B, P, V), nsp_logits (B, 2)). The vocabulary projection runs only at
    `masked_lm_positions` (B, P) — as the original run_pretraining does, since it is most of the
    work at small sizes — or at every position (P = L) when none are given.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (model.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 masked_lm_positions=None, deterministic: bool = True):
        mlm_logits, pooled = _encode_and_predict(self, input_ids, token_type_ids, attention_mask,
                                                 masked_lm_positions, deterministic)
        nsp_logits = NspHead(self.config, self.dtype, name="seq_relationship")(pooled)
        return mlm_logits, nsp_logits


class BertForMaskedLM(nn.Module):
    """BERT with the MLM head only (fill-mask; HF BertForMaskedLM checkpoints).

    Returns mlm_logits (B, P, V), at `masked_lm_positions` or every position.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (model.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 masked_lm_positions=None, deterministic: bool = True):
        mlm_logits, _ = _encode_and_predict(self, input_ids, token_type_ids, attention_mask,
                                            masked_lm_positions, deterministic)
        return mlm_logits


class BertForSequenceClassification(nn.Module):
    """Pooled [CLS] → dropout → linear: logits (B, num_labels)."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (model.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True):
        cfg = self.config
        _, pooled = BertModel(cfg, self.dtype, self.remat, name="bert")(
            input_ids, token_type_ids, attention_mask, deterministic)
        rate = cfg.hidden_dropout_prob if cfg.classifier_dropout is None else cfg.classifier_dropout
        pooled = nn.Dropout(rate)(pooled, deterministic=deterministic)
        logits = dense(cfg, cfg.num_labels, self.dtype, "classifier")(pooled)
        return logits.astype(jnp.float32)


def model_for_params(config: BertConfig, params, dtype=jnp.float32) -> nn.Module:
    """The module whose parameter tree has exactly the top-level keys of `params`."""
    keys = frozenset(params)
    if keys == {"bert"}:
        return BertModel(config, dtype)  # note: applied to params["bert"]
    for cls in (BertForPreTraining, BertForMaskedLM, BertForSequenceClassification):
        if keys == HEAD_KEYS[cls] | {"bert"}:
            return cls(config, dtype)
    raise ValueError(f"no BERT model has the parameter groups {sorted(keys)}")


HEAD_KEYS = {
    BertModel: frozenset(),
    BertForPreTraining: frozenset({"predictions", "seq_relationship"}),
    BertForMaskedLM: frozenset({"predictions"}),
    BertForSequenceClassification: frozenset({"classifier"}),
}
