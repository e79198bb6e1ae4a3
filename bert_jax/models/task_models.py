"""Task models: the encoder under `params["bert"]` and each head under its own top-level key.

`predictions` and `seq_relationship` (pretraining), `classifier` (sequence classification): one
checkpoint serves every model that shares those parts. ARCHITECTURES is the one table from a
Hugging Face architecture name to our module and its head groups; conversion and model
directories read it, nothing else lists them.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel, dense, word_embeddings
from bert_jax.models.heads import MlmHead, NspHead, gather_positions


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
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

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
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

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
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

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


# Hugging Face architecture name → (our module, its parameter groups besides "bert")
ARCHITECTURES = {
    "BertModel": (BertModel, frozenset()),
    "BertForPreTraining": (BertForPreTraining, frozenset({"predictions", "seq_relationship"})),
    "BertForMaskedLM": (BertForMaskedLM, frozenset({"predictions"})),
    "BertForSequenceClassification": (BertForSequenceClassification, frozenset({"classifier"})),
}


def architecture_of(groups) -> str:
    """The architecture whose parameter tree has exactly the top-level keys `groups`."""
    keys = frozenset(groups)
    for name, (_, heads) in ARCHITECTURES.items():
        if keys == heads | {"bert"}:
            return name
    raise BertJaxError(f"params: unsupported parameter groups {sorted(keys)}")


def model_for_params(config: BertConfig, params, dtype=jnp.float32) -> nn.Module:
    """The module whose parameter tree has exactly the top-level keys of `params`.

    A bare BertModel is applied to params["bert"], the others to the whole tree.
    """
    module, _ = ARCHITECTURES[architecture_of(params)]
    return module(config, dtype)
