"""BertConfig: the model's hyperparameters, with Hugging Face config.json field names.

One frozen dataclass (hashable, so it can sit on a Linen module and in jit caches); variants come
from `.replace(...)`. Reading a config.json validates every field we use and names the bad one.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

from bert_jax import json_limits
from bert_jax.errors import BertJaxError

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")

# (layers, hidden, heads) of the paper's models and of Turc et al.'s compact BERTs.
PRESETS = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

# config.json fields that only steer Hugging Face's runtime; reading them is harmless.
# num_labels names its labels LABEL_0 …: a crafted 10**9 would build 10**9 names before any
# weight is read. A real label set this large comes with its names (id2label, bounded by the file).
MAX_LABELS = 100_000
# transformers' values of config.problem_type (None: inferred from num_labels and the labels)
PROBLEM_TYPES = (None, "regression", "single_label_classification",
                 "multi_label_classification")

_HF_RUNTIME_FIELDS = frozenset({
    "_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "gradient_checkpointing", "output_past", "is_decoder", "add_cross_attention", "bos_token_id",
    "eos_token_id", "label2id", "num_labels", "directionality", "pooler_fc_size",
    "pooler_num_attention_heads", "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type",
    "chunk_size_feed_forward", "return_dict", "output_hidden_states", "output_attentions",
    "tokenizer_class", "finetuning_task", "prefix", "task_specific_params", "id2label",
})


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyperparameters of one BERT; defaults are BERT-base uncased."""

    vocab_size: int = 30522
    hidden_size: int = 768  # H
    num_hidden_layers: int = 12
    num_attention_heads: int = 12  # N; head size D = H / N
    intermediate_size: int = 3072  # feed-forward width, 4H in the paper
    hidden_act: str = "gelu"  # exact (erf) GELU, as the released checkpoints
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02  # stddev of the truncated normal init
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    classifier_dropout: Optional[float] = None  # None: use hidden_dropout_prob
    tie_word_embeddings: bool = True  # MLM decoder shares the word embedding matrix
    id2label: tuple = ("LABEL_0", "LABEL_1")  # class names of the classification head
    position_embedding_type: str = "absolute"  # the only kind BERT has
    problem_type: Optional[str] = None  # transformers' field: "regression" = one output, MSE

    model_type = "bert"  # class constant, written to config.json

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("pad_token_id", self.pad_token_id, minimum=0)
        if self.pad_token_id >= self.vocab_size:
            raise BertJaxError(f"pad_token_id: {self.pad_token_id} is outside the vocabulary "
                               f"(vocab_size {self.vocab_size})")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is None and name == "classifier_dropout":
                continue
            if not _is_number(value) or not 0.0 <= value < 1.0:
                raise BertJaxError(f"{name}: expected a probability in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not _is_number(value) or value <= 0:
                raise BertJaxError(f"{name}: expected a positive number, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise BertJaxError(
                f"hidden_size: {self.hidden_size} is not divisible by num_attention_heads "
                f"({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise BertJaxError(f"hidden_act: unknown activation {self.hidden_act!r}; "
                               f"expected one of {', '.join(ACTIVATIONS)}")
        if self.position_embedding_type != "absolute":
            raise BertJaxError(f"position_embedding_type: only 'absolute' is supported, got "
                               f"{self.position_embedding_type!r}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise BertJaxError(f"tie_word_embeddings: expected true or false, got "
                               f"{self.tie_word_embeddings!r}")
        if not isinstance(self.id2label, tuple) or not self.id2label or not all(
                isinstance(label, str) for label in self.id2label):
            raise BertJaxError(f"id2label: expected a non-empty tuple of label names, got "
                               f"{self.id2label!r}")
        if self.problem_type not in PROBLEM_TYPES:
            raise BertJaxError(f"problem_type: expected one of "
                               f"{', '.join(map(str, PROBLEM_TYPES[1:]))} or none, got "
                               f"{self.problem_type!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def num_labels(self) -> int:
        return len(self.id2label)

    @classmethod
    def preset(cls, name: str, **overrides) -> "BertConfig":
        """BERT-tiny … BERT-large: intermediate 4H, vocab 30522, 512 positions, 2 segments."""
        if name not in PRESETS:
            raise BertJaxError(f"preset: unknown model size {name!r}; expected one of "
                               f"{', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden)
        fields.update(overrides)
        return cls(**fields)

    def replace(self, **changes) -> "BertConfig":
        return dataclasses.replace(self, **changes)

    # -- config.json -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The config.json dict transformers' BertConfig reads."""
        d = dataclasses.asdict(self)
        d["id2label"] = {str(i): label for i, label in enumerate(self.id2label)}
        d["label2id"] = {label: i for i, label in enumerate(self.id2label)}
        d["model_type"] = self.model_type
        if d["problem_type"] is None:  # left out, as transformers' own configs leave it out
            del d["problem_type"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> "BertConfig":
        """Validate a config.json dict; Hugging Face-only runtime fields are ignored."""
        if not isinstance(d, dict):
            raise BertJaxError(f"{source}: expected a JSON object, got {type(d).__name__}")
        model_type = d.get("model_type")
        if model_type is not None and model_type != "bert":
            raise BertJaxError(f"{source}: model_type is {model_type!r}, not 'bert'; only BERT "
                               f"checkpoints are supported")
        if model_type is None and not {"hidden_size", "num_attention_heads"} <= d.keys():
            raise BertJaxError(f"{source}: not a BERT config (no model_type, hidden_size or "
                               f"num_attention_heads)")
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in d.items() if k in names}
        if "id2label" in d:
            fields["id2label"] = _labels_from_json(d["id2label"], source)
        elif "num_labels" in d:
            _check_int("num_labels", d["num_labels"], minimum=1, source=source)
            if d["num_labels"] > MAX_LABELS:  # each label gets a name here, before any weight
                raise BertJaxError(f"{source}: num_labels: {d['num_labels']} is more than "
                                   f"{MAX_LABELS:,}; give the label names as id2label")
            fields["id2label"] = tuple(f"LABEL_{i}" for i in range(d["num_labels"]))
        try:
            return cls(**fields)
        except BertJaxError as e:
            raise BertJaxError(f"{source}: {e}") from None

    def to_json_file(self, path: str, architectures: Optional[list[str]] = None) -> None:
        d = self.to_dict()
        if architectures:
            d["architectures"] = list(architectures)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2, sort_keys=True)
            f.write("\n")

    @classmethod
    def from_json_file(cls, path: str) -> "BertConfig":
        if not os.path.isfile(path):
            raise BertJaxError(f"{path}: config file not found")
        try:
            with open(path, encoding="utf-8") as f:
                d = json_limits.loads(f.read(), path)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BertJaxError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(d, source=path)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(name, value, minimum, source=None):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        where = f"{source}: " if source else ""
        raise BertJaxError(f"{where}{name}: expected an integer ≥ {minimum}, got {value!r}")


def _labels_from_json(id2label, source) -> tuple:
    """{"0": "neg", "1": "pos"} → ("neg", "pos"); ids must be exactly 0..n-1."""
    if isinstance(id2label, (list, tuple)):
        return tuple(str(label) for label in id2label)
    if not isinstance(id2label, dict) or not id2label:
        raise BertJaxError(f"{source}: id2label: expected a non-empty object, got {id2label!r}")
    try:
        by_id = {int(k): str(v) for k, v in id2label.items()}
    except ValueError:
        raise BertJaxError(f"{source}: id2label: keys must be integers, got "
                           f"{list(id2label)!r}") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise BertJaxError(f"{source}: id2label: ids must be 0..{len(by_id) - 1}, got "
                           f"{sorted(by_id)}")
    return tuple(by_id[i] for i in range(len(by_id)))
