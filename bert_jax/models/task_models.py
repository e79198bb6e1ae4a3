"""Task models: the encoder under `params["bert"]` and each head under its own top-level key.

`predictions` and `seq_relationship` (pretraining), `classifier` (sequence and token
classification, multiple choice), `qa_outputs` (span question answering): one checkpoint serves
every model that shares those parts. ARCHITECTURES is the one table from a Hugging Face
architecture name to our module and its head groups; conversion and model directories read it,
nothing else lists them. Three architectures share the `classifier` group, so the lookup also
reads the tree's shape (pooler present, classifier width) and, where one is known, the name
config.json gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel, dense, word_embeddings
from bert_jax.models.heads import MlmHead, NspHead


def _encode_and_predict(module, input_ids, token_type_ids, attention_mask, positions,
                        deterministic, need_pooled: bool = True):
    """The encoder ("bert") and MLM head ("predictions") inside `module`'s compact call.

    Returns (mlm_logits (B, P, V), pooled_output (B, H); without need_pooled, pooled is not
    BERT's). With `positions`, training and inference alike compute the last encoder layer only
    where the heads read it: [CLS] (the pooler's row, when pooled is needed) and the P masked
    positions; its keys and values are still every position's, so the outputs there are the
    full layer's. At 15% masking this skips about 80% of the last layer (a third of BERT-tiny's
    encoder), and its dropout masks are drawn over those rows only.
    """
    bert = BertModel(module.config, module.dtype, module.remat, name="bert")
    at = positions
    if positions is not None and need_pooled:
        at = jnp.concatenate([_first(positions), positions.astype(jnp.int32)], axis=1)
    sequence_output, pooled = bert(input_ids, token_type_ids, attention_mask, deterministic,
                                   output_positions=at)
    if positions is not None and need_pooled:
        sequence_output = sequence_output[:, 1:]  # the pooler read row 0, [CLS]
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
                                            masked_lm_positions, deterministic, need_pooled=False)
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
            input_ids, token_type_ids, attention_mask, deterministic,
            output_positions=last_layer_at(_first(input_ids), deterministic))
        pooled = _classifier_dropout(cfg)(pooled, deterministic=deterministic)
        logits = dense(cfg, cfg.num_labels, self.dtype, "classifier")(pooled)
        return logits.astype(jnp.float32)


def last_layer_at(positions, deterministic: bool):
    """Where a forward pass needs the last encoder layer (BertModel output_positions): at
    `positions` only. Training computes it everywhere, so its dropout masks, drawn over the
    full (B, L, H) shape, stay those of every earlier run."""
    return positions if deterministic else None


def _first(input_ids):
    """(B, 1) zeros: the [CLS] position of each row."""
    return jnp.zeros((input_ids.shape[0], 1), jnp.int32)


def _classifier_dropout(cfg: BertConfig) -> nn.Dropout:
    """HF's rule: classifier_dropout when set, else hidden_dropout_prob."""
    return nn.Dropout(cfg.hidden_dropout_prob if cfg.classifier_dropout is None
                      else cfg.classifier_dropout)


class BertForQuestionAnswering(nn.Module):
    """Span extraction (SQuAD): `qa_outputs` linear over every position, no pooler.

    Returns (start_logits (B, L), end_logits (B, L)), float32. HF sizes qa_outputs by
    num_labels and splits it in two, so the config must have exactly two labels.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True):
        cfg = self.config
        if cfg.num_labels != 2:
            raise BertJaxError(f"id2label: question answering needs 2 labels (start, end), got "
                               f"{cfg.num_labels}")
        x = BertModel(cfg, self.dtype, self.remat, add_pooling_layer=False, name="bert")(
            input_ids, token_type_ids, attention_mask, deterministic)[0]
        logits = dense(cfg, 2, self.dtype, "qa_outputs")(x).astype(jnp.float32)  # (B, L, 2)
        return logits[..., 0], logits[..., 1]


class BertForTokenClassification(nn.Module):
    """Tagging (NER, POS): dropout → `classifier` linear over every position, no pooler.

    Returns logits (B, L, num_labels), float32.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True):
        cfg = self.config
        x = BertModel(cfg, self.dtype, self.remat, add_pooling_layer=False, name="bert")(
            input_ids, token_type_ids, attention_mask, deterministic)[0]
        x = _classifier_dropout(cfg)(x, deterministic=deterministic)
        return dense(cfg, cfg.num_labels, self.dtype, "classifier")(x).astype(jnp.float32)


class BertForMultipleChoice(nn.Module):
    """SWAG-style choice: each (B, C, L) candidate encoded alone, pooled → dropout → one logit.

    Returns logits (B, C), float32; softmax over C picks the answer. config.num_labels is unused
    (as in HF): the `classifier` always has width 1.
    """

    config: BertConfig
    dtype: jnp.dtype = jnp.float32
    remat: bool = False  # recompute each encoder layer in the backward pass (encoder.Encoder)

    @nn.compact
    def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
                 deterministic: bool = True):
        cfg = self.config
        B, C, L = input_ids.shape
        flat = lambda x: None if x is None else x.reshape(B * C, L)  # noqa: E731
        _, pooled = BertModel(cfg, self.dtype, self.remat, name="bert")(
            flat(input_ids), flat(token_type_ids), flat(attention_mask), deterministic,
            output_positions=last_layer_at(_first(flat(input_ids)), deterministic))
        pooled = _classifier_dropout(cfg)(pooled, deterministic=deterministic)
        logits = dense(cfg, 1, self.dtype, "classifier")(pooled)  # (B·C, 1)
        return logits.reshape(B, C).astype(jnp.float32)


# Hugging Face architecture name → (our module, its parameter groups besides "bert")
ARCHITECTURES = {
    "BertModel": (BertModel, frozenset()),
    "BertForPreTraining": (BertForPreTraining, frozenset({"predictions", "seq_relationship"})),
    "BertForMaskedLM": (BertForMaskedLM, frozenset({"predictions"})),
    "BertForSequenceClassification": (BertForSequenceClassification, frozenset({"classifier"})),
    "BertForQuestionAnswering": (BertForQuestionAnswering, frozenset({"qa_outputs"})),
    "BertForTokenClassification": (BertForTokenClassification, frozenset({"classifier"})),
    "BertForMultipleChoice": (BertForMultipleChoice, frozenset({"classifier"})),
}
# those whose params["bert"] has no pooler (HF's add_pooling_layer=False)
POOLER_FREE = frozenset({"BertForQuestionAnswering", "BertForTokenClassification"})


def choose_architecture(groups, pooler: Optional[bool] = None, width: Optional[int] = None,
                        num_labels: Optional[int] = None, name: Optional[str] = None,
                        where: str = "params", problem_type: Optional[str] = None) -> str:
    """The architecture with top-level parameter groups `groups`.

    `name` (config.json's, when known) wins among those. Otherwise the tree's shape narrows
    them: `pooler` (present in "bert"), `width` (of the classifier: 1 for multiple choice,
    num_labels for sequence and token classification), `problem_type` (set: a sequence
    classifier or regressor, whose one-output head looks like multiple choice's). A clue that
    rules out every candidate
    is skipped, so shape checks downstream can name the mismatch. Still several → refused.
    """
    keys = frozenset(groups)
    fits = [n for n, (_, heads) in ARCHITECTURES.items() if keys == heads | {"bert"}]
    if not fits:
        raise BertJaxError(f"{where}: unsupported parameter groups {sorted(keys)}")
    if name in fits:
        return name
    choice = "BertForMultipleChoice"
    clues = [lambda n: pooler is None or (n not in POOLER_FREE) == pooler,
             lambda n: width is None or n != choice or width == 1,
             lambda n: None in (width, num_labels) or n == choice or width == num_labels,
             lambda n: problem_type is None or n == "BertForSequenceClassification"]
    for clue in clues:
        fits = [n for n in fits if clue(n)] or fits
    if len(fits) > 1:
        raise BertJaxError(f"{where}: the parameters fit {' and '.join(fits)} alike; name the "
                           f"architecture (config.json \"architectures\")")
    return fits[0]


def architecture_of(params, config: Optional[BertConfig] = None,
                    name: Optional[str] = None) -> str:
    """The architecture of a params tree (or of bare group names), `name` choosing where the
    tree alone cannot (see choose_architecture)."""
    pooler = width = None
    if isinstance(params, Mapping):
        if isinstance(params.get("bert"), Mapping):
            pooler = "pooler" in params["bert"]
        kernel = params.get("classifier")
        kernel = kernel.get("kernel") if isinstance(kernel, Mapping) else None
        width = kernel.shape[-1] if hasattr(kernel, "shape") else None
    return choose_architecture(params, pooler, width, config and config.num_labels, name,
                               problem_type=config and config.problem_type)


def model_for_params(config: BertConfig, params, dtype=jnp.float32,
                     name: Optional[str] = None) -> nn.Module:
    """The module whose parameter tree `params` is (architecture_of; `name` as there).

    A bare BertModel is applied to params["bert"], the others to the whole tree.
    """
    module, _ = ARCHITECTURES[architecture_of(params, config, name)]
    return module(config, dtype)
