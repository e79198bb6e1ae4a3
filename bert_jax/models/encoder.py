"""The BERT encoder as Flax Linen modules (Devlin et al., 2018), parameter names mirroring HF's.

Shape legend: B batch, L sequence length, H hidden size, N attention heads, D = H / N head size,
I intermediate (feed-forward) size, V vocabulary size.

Parameters are always float32; `dtype` is the matmul dtype (float32 or bfloat16). The embedding
lookup and sum, LayerNorm outputs (hence the residual stream), the activation and the attention
softmax stay float32 either way, so bfloat16 rounds only what goes into and comes out of the
matmuls.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.ops.attention import attention, attention_probs
from bert_jax.models.ops.dense import Dense
from bert_jax.models.ops.dropout import Dropout
from bert_jax.models.ops.layer_norm import LayerNorm

ACTIVATION_FNS = {
    # exact GELU, as released BERT; written with erf (as torch) rather than jax.nn.gelu's erfc,
    # which XLA:CPU computes more slowly and whose gradient keeps more activations
    "gelu": lambda x: x * 0.5 * (1.0 + jax.lax.erf(x * 0.7071067811865476)),
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


def dense(config: BertConfig, features: int, dtype, name: str) -> Dense:
    return Dense(features, dtype=dtype, kernel_init=weight_init(config), name=name)


def activation(config: BertConfig, h) -> jax.Array:
    """The config's activation in float32 (bfloat16 loses digits there), float32 result.

    Recomputed in the backward pass from h (kept in its own dtype) rather than keeping the
    activation's float32 intermediates: less memory, no slower.
    """
    act = ACTIVATION_FNS[config.hidden_act]
    return jax.checkpoint(lambda h: act(h.astype(jnp.float32)))(h)


def layer_norm(config: BertConfig, name: str) -> LayerNorm:
    """Float32 LayerNorm whatever the compute dtype: the residual stream stays float32."""
    return LayerNorm(config.layer_norm_eps, name=name)


class Embeddings(nn.Module):
    """Token + segment + learned position embeddings, then LayerNorm and dropout."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, input_ids, token_type_ids, deterministic: bool):
        cfg = self.config
        init = weight_init(cfg)
        # float32 whatever self.dtype: a lookup and a sum, no matmul to round for
        embed = lambda n, name: nn.Embed(n, cfg.hidden_size, dtype=jnp.float32,  # noqa: E731
                                          embedding_init=init, name=name)
        positions = jnp.arange(input_ids.shape[1])[None, :]  # (1, L)
        x = (embed(cfg.vocab_size, "word_embeddings")(input_ids)
             + embed(cfg.max_position_embeddings, "position_embeddings")(positions)
             + embed(cfg.type_vocab_size, "token_type_embeddings")(token_type_ids))  # (B, L, H)
        x = layer_norm(cfg, "layer_norm")(x)
        return Dropout(cfg.hidden_dropout_prob)(x, deterministic=deterministic)


class SelfAttention(nn.Module):
    """Multi-head self-attention over unpadded keys, output projection, residual, LayerNorm."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool, output_attentions: bool = False,
                 positions=None):
        """positions (B, P): only the queries there (Encoder's last layer, when asked), so
        the output is (B, P, H); else every position's, (B, L, H)."""
        cfg = self.config
        B, L, H = x.shape
        heads = lambda y: y.reshape(B, -1, cfg.num_attention_heads, cfg.head_dim)  # noqa: E731
        xc = x.astype(self.dtype)  # rounded once, and kept once for the three backward passes
        if positions is not None:  # P query rows; keys and values stay every position's
            x = gather(x, positions)  # (B, P, H)
        q = heads(dense(cfg, H, self.dtype, "query")(
            xc if positions is None else gather(xc, positions)))  # (B, L or P, N, D)
        k = heads(dense(cfg, H, self.dtype, "key")(xc))  # (B, L, N, D)
        v = heads(dense(cfg, H, self.dtype, "value")(xc))  # (B, L, N, D)
        mask = attention_mask[:, None, None, :].astype(bool)  # (B, 1, 1, L): keys only
        rate = 0.0 if deterministic else cfg.attention_probs_dropout_prob
        ctx = attention(q, k, v, mask, dropout_rate=rate, dtype=self.dtype,  # (B, L or P, N, D)
                        dropout_rng=self.make_rng("dropout") if rate else None)
        y = dense(cfg, H, self.dtype, "output")(ctx.reshape(x.shape))  # (B, L or P, H)
        y = Dropout(cfg.hidden_dropout_prob)(y, deterministic=deterministic)
        out = layer_norm(cfg, "layer_norm")(x + y)
        if not output_attentions:
            return out
        # recomputed beside `attention` (one more q·k product) so the default path is untouched
        return out, attention_probs(q, k, mask, self.dtype)  # (B, N, L or P, L), no dropout


class FeedForward(nn.Module):
    """Position-wise H → I → H with the config's activation, residual, LayerNorm."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, deterministic: bool):
        cfg = self.config
        h = dense(cfg, cfg.intermediate_size, self.dtype, "intermediate")(x)  # (B, L, I)
        h = activation(cfg, h)  # (B, L, I) float32
        y = dense(cfg, cfg.hidden_size, self.dtype, "output")(h)  # (B, L, H)
        y = Dropout(cfg.hidden_dropout_prob)(y, deterministic=deterministic)
        return layer_norm(cfg, "layer_norm")(x + y)


class EncoderLayer(nn.Module):
    """One post-LayerNorm Transformer block."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool, output_attentions: bool = False,
                 positions=None):
        x = SelfAttention(self.config, self.dtype, name="attention")(
            x, attention_mask, deterministic, output_attentions, positions)
        x, probs = x if output_attentions else (x, None)
        x = FeedForward(self.config, self.dtype, name="feed_forward")(x, deterministic)
        return (x, probs) if output_attentions else x


class Encoder(nn.Module):
    """The stack of layers. remat: each layer's activations are recomputed in the backward pass
    (only its input is kept): less memory for long sequences, about a third more compute."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False

    @nn.compact
    def __call__(self, x, attention_mask, deterministic: bool, output_hidden_states: bool = False,
                 output_attentions: bool = False, positions=None):
        """x (B, L, H), or with either flag (x, hidden_states, attentions): the input and
        every layer's output, and every layer's attention probabilities (None if not asked).
        positions (B, P): the last layer only there, its output (B, P, H)."""
        # static_argnums counts self: 3 is `deterministic`, 4 `output_attentions`
        layer = nn.remat(EncoderLayer, static_argnums=(3, 4)) if self.remat else EncoderLayer
        hidden, attentions = [x], []
        last = self.config.num_hidden_layers - 1
        for i in range(self.config.num_hidden_layers):
            x = layer(self.config, self.dtype, name=f"layer_{i}")(
                x, attention_mask, deterministic, output_attentions,
                positions if i == last else None)
            if output_attentions:
                x, probs = x
                attentions.append(probs)
            hidden.append(x)
        if not (output_hidden_states or output_attentions):
            return x
        return (x, tuple(hidden) if output_hidden_states else None,
                tuple(attentions) if output_attentions else None)


class Pooler(nn.Module):
    """dense + tanh on the [CLS] (first) position."""

    config: BertConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, sequence_output):
        cls = sequence_output[:, 0]  # (B, H)
        return jnp.tanh(dense(self.config, self.config.hidden_size, self.dtype, "dense")(cls))


class BertOutput(NamedTuple):
    """BertModel's outputs when hidden states or attentions are asked for (a pytree: jit returns
    it). Unrequested fields are None."""

    sequence_output: jax.Array  # (B, L, H) float32, the last layer's output
    pooled_output: Optional[jax.Array]  # (B, H) in the computation dtype
    # num_layers + 1 (B, L, H) float32: the embeddings' output, then each layer's, as HF's
    hidden_states: Optional[tuple[jax.Array, ...]] = None
    # num_layers (B, N, L, L) float32 softmax probabilities, before attention dropout
    attentions: Optional[tuple[jax.Array, ...]] = None


class BertModel(nn.Module):
    """Embeddings → encoder → pooler.

    Returns (sequence_output (B, L, H) float32, a LayerNorm output; pooled_output (B, H) in the
    computation dtype); with output_hidden_states or output_attentions, a BertOutput whose
    first two fields are those, bit for bit.
    `attention_mask` is 1 for real tokens and 0 for padding; padded keys are never attended to.
    `remat` recomputes each encoder layer in the backward pass (see Encoder).
    `add_pooling_layer=False` (HF's name) makes no pooler weights and returns None for pooled:
    the per-position task models (question answering, token classification) have none.
    `output_positions` (B, P): the last layer is computed only at those positions, all that a
    [CLS] classifier (P = 1, position 0) or a masked-LM head reads: sequence_output (and the
    last hidden state) is then (B, P, H), the full one's rows there, and the pooler pools its
    first row. Its keys and values are still every position's; the rest of that layer (a
    sixth of MiniLM's work) is skipped for the other positions.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False
    add_pooling_layer: bool = True

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True, output_hidden_states: bool = False,
                 output_attentions: bool = False, output_positions=None):
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = jnp.ones_like(input_ids)
        x = Embeddings(self.config, self.dtype, name="embeddings")(
            input_ids, token_type_ids, deterministic)
        x = Encoder(self.config, self.dtype, self.remat, name="encoder")(
            x, attention_mask, deterministic, output_hidden_states, output_attentions,
            output_positions)
        full = output_hidden_states or output_attentions
        x, hidden_states, attentions = x if full else (x, None, None)
        pooled = (Pooler(self.config, self.dtype, name="pooler")(x) if self.add_pooling_layer
                  else None)
        return BertOutput(x, pooled, hidden_states, attentions) if full else (x, pooled)


def gather(x, positions) -> jax.Array:
    """(B, L, …) gathered at (B, P) positions → (B, P, …)."""
    positions = positions.astype(jnp.int32).reshape(positions.shape + (1,) * (x.ndim - 2))
    return jnp.take_along_axis(x, positions, axis=1)


def word_embeddings(bert: BertModel) -> Optional[jnp.ndarray]:
    """The (V, H) word embedding table of a bound BertModel, shared by the tied MLM decoder."""
    return bert.variables["params"]["embeddings"]["word_embeddings"]["embedding"]
