"""The model: config, encoder, heads and task models (Flax Linen; params as a pytree)."""

from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel
from bert_jax.models.heads import MlmHead, NspHead
from bert_jax.models.task_models import (ARCHITECTURES, BertForMaskedLM, BertForPreTraining,
                                         BertForSequenceClassification)

__all__ = ["ARCHITECTURES", "BertConfig", "BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForSequenceClassification", "MlmHead", "NspHead"]
