"""Pretraining-only choices about where the weights start (the model's own init is the
original's: normal(0, initializer_range) truncated at two standard deviations).

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

POSITION_INITS = ("normal", "sinusoidal")


def sinusoids(positions: int, features: int, std: float) -> np.ndarray:
    """(positions, features) float32: sin / cos pairs at geometric wavelengths 2π … 10⁴·2π,
    scaled to root-mean-square `std`, the normal init's (a sin/cos pair's squares sum to 1)."""
    pos = np.arange(positions, dtype=np.float64)[:, None]
    rates = 1.0 / 10000.0 ** (np.arange(0, features, 2, dtype=np.float64) / features)
    table = np.zeros((positions, features), np.float64)
    table[:, 0::2] = np.sin(pos * rates)
    table[:, 1::2] = np.cos(pos * rates[: features // 2])
    return (table * std * np.sqrt(2.0)).astype(np.float32)


def with_position_init(params: dict, config, kind: str) -> dict:
    """`params` (a BertFor* tree, the encoder under "bert") with the position embeddings
    started as `kind` ("normal": unchanged)."""
    if kind == "normal":
        return params
    table = params["bert"]["embeddings"]["position_embeddings"]["embedding"]
    start = sinusoids(table.shape[0], table.shape[1], config.initializer_range)
    embeddings = dict(params["bert"]["embeddings"],
                      position_embeddings={"embedding": jnp.asarray(start, table.dtype)})
    return dict(params, bert=dict(params["bert"], embeddings=embeddings))
