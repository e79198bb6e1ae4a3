"""bert_jax: BERT in JAX/Flax Linen — model, pretraining, fine-tuning, Hugging Face conversion.

Subpackages, lowest layer first (a module imports only from its own layer and those below):
resources → models/ops → models → data → model_files → runtime → inference → tasks →
training → glue → configs → cli.

The names below load on first use (PEP 562), so that `bert_jax.data` alone — in a data
preparation worker process, say — does not import JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bert_jax.errors import BertJaxError

from bert_jax.resources import VERSION as __version__  # noqa: F401

_LAZY = {"load_pretrained": "bert_jax.model_files.model_dir",
         **{name: "bert_jax.models" for name in (
             "BertConfig", "BertModel", "BertForPreTraining", "BertForMaskedLM",
             "BertForSequenceClassification", "BertForQuestionAnswering",
             "BertForTokenClassification", "BertForMultipleChoice", "MlmHead", "NspHead")}}

__all__ = ["BertConfig", "BertJaxError", "BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForSequenceClassification", "BertForQuestionAnswering",
           "BertForTokenClassification", "BertForMultipleChoice", "MlmHead", "NspHead",
           "load_pretrained"]

if TYPE_CHECKING:  # for readers and type checkers: what the lazy names are
    from bert_jax.model_files.model_dir import load_pretrained  # noqa: F401
    from bert_jax.models import (BertConfig, BertForMaskedLM,  # noqa: F401
                                 BertForMultipleChoice, BertForPreTraining,
                                 BertForQuestionAnswering, BertForSequenceClassification,
                                 BertForTokenClassification, BertModel, MlmHead, NspHead)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bert_jax' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
