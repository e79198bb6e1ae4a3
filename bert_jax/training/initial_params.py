"""Choices about where the weights start (the model's own init is the original's:
normal(0, initializer_range) truncated at two standard deviations).

Fine-tuning: `head_init="normal"` (the default) draws the fresh task head's kernels from a
plain normal (σ initializer_range), as transformers' `_init_weights` does, instead of the
original's truncated one (0.88σ root-mean-square, nothing beyond 2σ): over five seeds a side
it fine-tunes CoNLL-2003 NER 2.5 F1 better and level with transformers (bench/RESULTS.md).

`position_init="sinusoidal"` starts BERT's learned position embeddings as the Transformer's
sinusoids (Vaswani et al., 2017), scaled to the normal init's root-mean-square.
They stay learned parameters of an unchanged BERT (the export is a plain BertForPreTraining);
only their starting point differs. Sinusoids make the dot product of two positions a
function of their distance from the first step, so attention can find a token's neighbours
before it has learned what positions are: the early MLM plateau (frequent words only) is
shorter (bench/RESULTS.md, time to accuracy).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bert_jax.errors import BertJaxError

POSITION_INITS = ("normal", "sinusoidal")


def with_head_init(params: dict, head: str, kind: str, std: float, key) -> dict:
    """`params` with the ≥2-D kernels of group `head` redrawn from normal(0, std) when `kind`
    is "normal" (biases stay zero, as in both); unchanged for "truncated_normal", the model's
    own init. Pure: runs inside the jitted initialiser."""
    if kind == "truncated_normal":
        return params
    if kind != "normal":
        raise ValueError(f"head init {kind!r}: expected truncated_normal or normal")
    import jax
    from flax import traverse_util
    flat = traverse_util.flatten_dict(params[head])
    keys = iter(jax.random.split(key, len(flat)))
    redrawn = {name: (std * jax.random.normal(next(keys), leaf.shape, leaf.dtype)
                      if leaf.ndim >= 2 else leaf) for name, leaf in sorted(flat.items())}
    return {**params, head: traverse_util.unflatten_dict(redrawn)}


def _layer_count(encoder: dict, field: str, layers: int, where: str) -> int:
    count = sum(1 for name in encoder if name.startswith("layer_"))
    if not 0 <= layers <= count:
        raise BertJaxError(f"config.{field}: expected 0 to {count} (the layers of "
                           f"{where}), got {layers}")
    return count


def reinit_top(params: dict, fresh_encoder: dict, layers: int, where: str) -> dict:
    """`params` (params["bert"] the encoder) with the pooler and the top `layers` encoder
    layers taken from `fresh_encoder` (the model's own init for this seed), the rest as
    loaded: Zhang et al. 2021's re-initialisation, the same architecture before and after."""
    encoder = params["bert"]["encoder"]
    count = _layer_count(encoder, "reinit_layers", layers, where)
    bert = dict(params["bert"], encoder=dict(encoder))
    for i in range(count - layers, count):
        bert["encoder"][f"layer_{i}"] = fresh_encoder["encoder"][f"layer_{i}"]
    if layers and "pooler" in bert and "pooler" in fresh_encoder:
        bert["pooler"] = fresh_encoder["pooler"]
    return dict(params, bert=bert)


def reinit_query_key(params: dict, fresh_encoder: dict, layers: int, where: str) -> dict:
    """`params` with the query and key projections (kernels and biases) of the top `layers`
    encoder layers taken from `fresh_encoder`, everything else as loaded. Small random q/k
    make softmax(q·k) nearly uniform, so those layers' attention starts even — [CLS] reads
    every token — while the values, feed-forward layers and embeddings keep what pretraining
    learned. Why: the sharp local heads a language model ends with leave [CLS] reading the
    first few words, and a sentence task fine-tuned from there generalises worse than from
    random weights (bench/RESULTS.md, 2026-12-04: 51.0 ± 0.3 with the top layer's q/k
    redrawn against 37.9 ± 1.1 as exported)."""
    encoder = params["bert"]["encoder"]
    count = _layer_count(encoder, "reinit_attention", layers, where)
    bert = dict(params["bert"], encoder=dict(encoder))
    for i in range(count - layers, count):
        layer = dict(encoder[f"layer_{i}"])
        layer["attention"] = dict(layer["attention"])
        for name in ("query", "key"):
            layer["attention"][name] = fresh_encoder["encoder"][f"layer_{i}"]["attention"][name]
        bert["encoder"][f"layer_{i}"] = layer
    return dict(params, bert=bert)


def rescale_embeddings(params: dict, std: float) -> dict:
    """`params` with the word, position and segment embedding tables multiplied by one factor,
    `std` over the word table's standard deviation: the word table's becomes `std`, and the
    LayerNorm after the three tables' sum gives the same outputs (up to float rounding), so the
    model computes what it did. Why: Adam moves a weight by about the rate each step whatever
    its size, and pretraining grows these tables (σ 0.10 in the default export against the
    init's 0.02), so fine-tuning moves a pretrained table five times more slowly, relative to
    its size, than a fresh one; scaled back to the init's σ, it is as easy to move, and what
    pretraining learned is still its starting direction (bench/RESULTS.md, issue 37)."""
    emb = params["bert"]["embeddings"]
    words = np.asarray(emb["word_embeddings"]["embedding"])
    spread = words.std()
    if not spread > 0:  # a constant (or non-finite) table has no scale to set
        raise BertJaxError(f"config.rescale_embeddings: the word embedding table's σ is "
                           f"{spread}; expected a positive, finite one")
    factor = np.float32(std) / spread
    tables = ("word_embeddings", "position_embeddings", "token_type_embeddings")
    scaled = {name: (dict(emb[name], embedding=np.asarray(emb[name]["embedding"]) * factor)
                     if name in tables else emb[name]) for name in emb}
    return dict(params, bert=dict(params["bert"], embeddings=scaled))


def sinusoids(positions: int, features: int, std: float) -> np.ndarray:
    """(positions, features) float32: sin / cos pairs at geometric wavelengths 2π … 10⁴·2π,
    scaled to root-mean-square `std`, the normal init's (a sin/cos pair's squares sum to 1)."""
    pos = np.arange(positions, dtype=np.float64)[:, None]
    rates = 1.0 / 10000.0 ** (np.arange(0, features, 2, dtype=np.float64) / features)
    table = np.zeros((positions, features), np.float64)
    table[:, 0::2] = np.sin(pos * rates)
    table[:, 1::2] = np.cos(pos * rates[: features // 2])
    return (table * std * np.sqrt(2.0)).astype(np.float32)


def starting_params(params: dict, config, cfg) -> dict:
    """A freshly initialised BertFor* tree as a PretrainConfig `cfg` starts it: its position
    embeddings (cfg.position_init) and its attention (cfg.mimetic_qk, in cfg.mimetic_heads
    heads of cfg.mimetic_layers layers)."""
    return with_mimetic_qk(with_position_init(params, config, cfg.position_init,
                                              cfg.position_scale), config, cfg.mimetic_qk,
                           cfg.mimetic_heads, cfg.mimetic_layers)


def with_mimetic_qk(params: dict, config, std: float, heads: int = 0, layers: int = 0) -> dict:
    """The first `heads` heads (0: all) of the first `layers` layers (0: all) with their query
    kernel columns rescaled to standard deviation `std` and the key kernel's started as a copy
    of them (biases stay 0); the other heads keep the original init. `std` 0 leaves the params
    unchanged.

    Mimetic initialisation (Trockman & Kolter, 2023): with W_k = W_q, each head's W_q W_kᵀ is
    positive semi-definite, so a query's logit is highest for the keys most like it: itself,
    and with sinusoidal positions the positions nearest it. Attention starts local instead of
    uniform, which is what the early MLM plateau lacks (bench/RESULTS.md, neighbour
    attention). A head left at the original init starts spread evenly over the sequence.
    The copy is only where training starts: both kernels are trained freely, and the model
    is an unchanged BERT. A head's logit for a unit-variance input and itself is about
    std² · H² / N / √(H/N) (64 · 128 · std² / 8 for BERT-tiny: 2.6 at std 0.05).
    """
    if not std:
        return params
    n = config.num_attention_heads
    if not 0 <= heads <= n:
        raise BertJaxError(f"config.mimetic_heads: expected 0 (all) to {n}, the model's heads "
                           f"per layer, got {heads}")
    depth = config.num_hidden_layers
    if not 0 <= layers <= depth:
        raise BertJaxError(f"config.mimetic_layers: expected 0 (all) to {depth}, the model's "
                           f"layers, got {layers}")
    width = (heads or n) * (config.hidden_size // n)  # a head's columns are contiguous
    scale = std / (0.8796 * config.initializer_range)  # a 2σ-truncated normal's std is 0.88σ
    encoder = dict(params["bert"]["encoder"])
    for name, layer in encoder.items():
        if int(name.rsplit("_", 1)[-1]) >= (layers or depth):  # "layer_0", "layer_1", …
            continue
        attention = dict(layer["attention"])
        q, k = attention["query"]["kernel"], attention["key"]["kernel"]
        q = jnp.concatenate([q[:, :width] * scale, q[:, width:]], axis=1)
        k = jnp.concatenate([q[:, :width], k[:, width:]], axis=1)
        attention["query"] = dict(attention["query"], kernel=q)
        attention["key"] = dict(attention["key"], kernel=k)
        encoder[name] = dict(layer, attention=attention)
    return dict(params, bert=dict(params["bert"], encoder=encoder))


def with_position_init(params: dict, config, kind: str, scale: float = 1.0) -> dict:
    """`params` (a BertFor* tree, the encoder under "bert") with the position embeddings
    started as `kind` ("normal": unchanged), times `scale`: above 1, positions weigh more than
    the token embeddings (both σ initializer_range) in the first LayerNorm's output."""
    if kind == "normal" and scale == 1.0:
        return params
    table = params["bert"]["embeddings"]["position_embeddings"]["embedding"]
    start = (table if kind == "normal" else
             sinusoids(table.shape[0], table.shape[1], config.initializer_range)) * scale
    embeddings = dict(params["bert"]["embeddings"],
                      position_embeddings={"embedding": jnp.asarray(start, table.dtype)})
    return dict(params, bert=dict(params["bert"], embeddings=embeddings))
