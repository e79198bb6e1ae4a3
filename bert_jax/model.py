"""The BERT encoder as Flax Linen modules (Devlin et al., 2018), parameter names mirroring HF's.

Shape legend: B batch, L sequence length, H hidden size, N attention heads, D = H / N head size,
I intermediate (feed-forward) size, V vocabulary size.

Parameters are always float32; `dtype` is the matmul dtype (float32 or bfloat16). LayerNorm
outputs (hence the residual stream), GELU and the attention softmax stay float32 either way,
so bfloat16 rounds only what goes into and comes out of the matmuls.
"""

from __future__ import annotations

from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.config import BertConfig

ACTIVATION_FNS = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # exact erf GELU, as released BERT
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
}


def weight_init(config: BertConfig):
    """The original's init: normal(0, initializer_range) truncated at two standard deviations."""
    return jax.nn.initializers.truncated_normal(stddev=config.initializer_range)


def dense(config: BertConfig, features: int, dtype, name: str) -> nn.Dense:
    return nn.Dense(features, dtype=dtype, kernel_init=weight_init(config),
                    bias_init=nn.initializers.zeros, name=name)


def layer_norm(config: BertConfig, name: str) -> nn.LayerNorm:
    """Float32 LayerNorm whatever the compute dtype: the residual stream stays float32."""
    return nn.LayerNorm(epsilon=config.layer_norm_eps, dtype=jnp.float32, name=name)


class Embeddings(nn.Module):
    """Token + segment + learned position embeddings, then LayerNorm and dropout."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, input_ids, token_type_ids, deterministic: bool):
        cfg = self.config
        init = weight_init(cfg)
        embed = lambda n, name: nn.Embed(n, cfg.hidden_size, dtype=self.dtype,  # noqa: E731
                                          embedding_init=init, name=name)
        positions = jnp.arange(input_ids.shape[1])[None, :]  # (1, L)
        x = (embed(cfg.vocab_size, "word_embeddings")(input_ids)
             + embed(cfg.max_position_embeddings, "position_embeddings")(positions)
             + embed(cfg.type_vocab_size, "token_type_embeddings")(token_type_ids))  # (B, L, H)
        x = layer_norm(cfg, "layer_norm")(x)
        return nn.Dropout(cfg.hidden_dropout_prob)(x, deterministic=deterministic)


class SelfAttention(nn.Module):
    """Multi-head self-attention over unpadded keys, output projection, residual, LayerNorm."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool):
        cfg = self.config
        B, L, H = x.shape
        heads = lambda y: y.reshape(B, L, cfg.num_attention_heads, cfg.head_dim)  # noqa: E731
        q = heads(dense(cfg, H, self.dtype, "query")(x))  # (B, L, N, D)
        k = heads(dense(cfg, H, self.dtype, "key")(x))  # (B, L, N, D)
        v = heads(dense(cfg, H, self.dtype, "value")(x))  # (B, L, N, D)
        mask = attention_mask[:, None, None, :].astype(bool)  # (B, 1, 1, L): keys only
        rate = cfg.attention_probs_dropout_prob
        if deterministic or rate == 0.0:
            ctx = jax.nn.dot_product_attention(q, k, v, mask=mask)  # (B, L, N, D)
        else:  # BERT drops attention probabilities; jax.nn's fused kernel has no dropout
            ctx = nn.dot_product_attention(
                q, k, v, mask=mask, dropout_rng=self.make_rng("dropout"), dropout_rate=rate,
                broadcast_dropout=False, deterministic=False, dtype=self.dtype,
                force_fp32_for_softmax=True)
        y = dense(cfg, H, self.dtype, "output")(ctx.reshape(B, L, H))  # (B, L, H)
        y = nn.Dropout(cfg.hidden_dropout_prob)(y, deterministic=deterministic)
        return layer_norm(cfg, "layer_norm")(x + y)


class FeedForward(nn.Module):
    """Position-wise H → I → H with the config's activation, residual, LayerNorm."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, deterministic: bool):
        cfg = self.config
        h = dense(cfg, cfg.intermediate_size, self.dtype, "intermediate")(x)  # (B, L, I)
        h = ACTIVATION_FNS[cfg.hidden_act](h.astype(jnp.float32))  # f32: bf16 GELU loses digits
        y = dense(cfg, cfg.hidden_size, self.dtype, "output")(h)  # (B, L, H)
        y = nn.Dropout(cfg.hidden_dropout_prob)(y, deterministic=deterministic)
        return layer_norm(cfg, "layer_norm")(x + y)


class EncoderLayer(nn.Module):
    """One post-LayerNorm Transformer block."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool):
        x = SelfAttention(self.config, self.dtype, name="attention")(
            x, attention_mask, deterministic)
        return FeedForward(self.config, self.dtype, name="feed_forward")(x, deterministic)


class Encoder(nn.Module):
    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool):
        for i in range(self.config.num_hidden_layers):
            x = EncoderLayer(self.config, self.dtype, name=f"layer_{i}")(
                x, attention_mask, deterministic)
        return x


class Pooler(nn.Module):
    """dense + tanh on the [CLS] (first) position."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, sequence_output):
        cls = sequence_output[:, 0]  # (B, H)
        return jnp.tanh(dense(self.config, self.config.hidden_size, self.dtype, "dense")(cls))


class BertModel(nn.Module):
    """Embeddings → encoder → pooler.

    Returns (sequence_output (B, L, H), pooled_output (B, H)) in the computation dtype.
    `attention_mask` is 1 for real tokens and 0 for padding; padded keys are never attended to.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True):
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = jnp.ones_like(input_ids)
        x = Embeddings(self.config, self.dtype, name="embeddings")(
            input_ids, token_type_ids, deterministic)
        x = Encoder(self.config, self.dtype, name="encoder")(x, attention_mask, deterministic)
        return x, Pooler(self.config, self.dtype, name="pooler")(x)


def word_embeddings(bert: BertModel) -> Optional[jnp.ndarray]:
    """The (V, H) word embedding table of a bound BertModel, shared by the tied MLM decoder."""
    return bert.variables["params"]["embeddings"]["word_embeddings"]["embedding"]
