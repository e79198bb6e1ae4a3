"""bert_jax: BERT in JAX/Flax Linen — model, pretraining, fine-tuning, Hugging Face conversion.

Subpackages, lowest layer first (a module imports only from its own layer and those below):
models/ops → models → data → checkpoints → training → inference → cli.
"""

from bert_jax.checkpoints.model_dir import load_pretrained
from bert_jax.errors import BertJaxError
from bert_jax.models import (BertConfig, BertForMaskedLM, BertForPreTraining,
                             BertForSequenceClassification, BertModel, MlmHead, NspHead)

__all__ = ["BertConfig", "BertJaxError", "BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForSequenceClassification", "MlmHead", "NspHead", "load_pretrained"]
