"""bert_jax: BERT in JAX/Flax Linen — model, pretraining, fine-tuning, Hugging Face conversion."""

from bert_jax.config import BertConfig
from bert_jax.errors import BertJaxError
from bert_jax.heads import (BertForMaskedLM, BertForPreTraining, BertForSequenceClassification,
                            MlmHead, NspHead)
from bert_jax.model import BertModel
from bert_jax.pretrained import load_pretrained

__all__ = ["BertConfig", "BertJaxError", "BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForSequenceClassification", "MlmHead", "NspHead", "load_pretrained"]
