"""Pretraining heads on the encoder's output: masked LM (tied decoder, own bias) and next sentence.

Logits are returned in float32 whatever the computation dtype.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import activation, dense, layer_norm, weight_init
from bert_jax.models.ops import matmul
from bert_jax.models.ops.dense import Dense


class MlmHead(nn.Module):
    """transform (dense + act + LayerNorm) → decoder (tied to the word embeddings) + own bias."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, hidden, embedding_table):
        cfg = self.config
        h = dense(cfg, cfg.hidden_size, self.dtype, "dense")(hidden)  # (B, P, H)
        h = activation(cfg, h)  # float32, as in the encoder's FeedForward
        h = layer_norm(cfg, "layer_norm")(h)
        if cfg.tie_word_embeddings:
            # as one (B·P, H) matrix, for the reason in ops.dense
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
