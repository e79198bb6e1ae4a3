"""The model: config, encoder, heads and task models (Flax Linen; params as a pytree)."""

from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel, BertOutput
from bert_jax.models.heads import MlmHead, NspHead
from bert_jax.models.task_models import (ARCHITECTURES, BertForMaskedLM, BertForMultipleChoice,
                                         BertForPreTraining, BertForQuestionAnswering,
                                         BertForSequenceClassification,
                                         BertForTokenClassification)

__all__ = ["ARCHITECTURES", "BertConfig", "BertModel", "BertOutput", "BertForPreTraining",
           "BertForMaskedLM", "BertForSequenceClassification", "BertForQuestionAnswering",
           "BertForTokenClassification", "BertForMultipleChoice", "MlmHead", "NspHead"]
