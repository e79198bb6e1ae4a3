"""Hugging Face PyTorch BERT checkpoints ↔ our Flax params, through ONE explicit name table.

Every difference between HF's names and ours lives in `name_table`. Loading uses every source
tensor, ignores a short explicit list (the `position_ids` buffer, tied copies checked equal), or
refuses the checkpoint naming the tensor; shapes are checked against the model's own
`jax.eval_shape`, so a wrong shape names the tensor and both shapes. Safetensors are read with
numpy; only pytorch_model.bin needs torch.
"""

from __future__ import annotations

import json
import logging
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bert_jax import json_limits
from bert_jax.model_files.atomic import atomic_directory
from bert_jax.model_files.paths import CONFIG, SAFETENSORS
from bert_jax.model_files.weight_files import missing_dir_reason, read_state_dict
from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel, Pooler
from bert_jax.models.task_models import (ARCHITECTURES, POOLER_FREE, architecture_of,
                                         choose_architecture)

log = logging.getLogger(__name__)

class Entry(NamedTuple):
    ours: tuple  # path in our params tree
    hf: str  # HF state-dict name, without the "bert." prefix for encoder tensors
    transpose: bool  # torch Linear weight (out, in) ↔ Flax Dense kernel (in, out)


def _linear(ours: tuple, hf: str) -> list[Entry]:
    return [Entry(ours + ("kernel",), f"{hf}.weight", True), Entry(ours + ("bias",), f"{hf}.bias",
                                                                    False)]


def _norm(ours: tuple, hf: str) -> list[Entry]:
    return [Entry(ours + ("scale",), f"{hf}.weight", False), Entry(ours + ("bias",), f"{hf}.bias",
                                                                    False)]


def name_table(config: BertConfig, groups, prefix: str = "bert.",
               pooler: bool = True) -> list[Entry]:
    """All (our path, HF name) pairs of a model with parameter groups `groups`.

    `prefix` is "bert." for the task models and "" for a bare BertModel; `pooler` is False for
    the per-position models (task_models.POOLER_FREE).
    """
    e, b = ("bert", "embeddings"), f"{prefix}embeddings"
    table = [Entry(e + ("word_embeddings", "embedding"), f"{b}.word_embeddings.weight", False),
             Entry(e + ("position_embeddings", "embedding"), f"{b}.position_embeddings.weight",
                   False),
             Entry(e + ("token_type_embeddings", "embedding"), f"{b}.token_type_embeddings.weight",
                   False)]
    table += _norm(e + ("layer_norm",), f"{b}.LayerNorm")
    for i in range(config.num_hidden_layers):
        ours, hf = ("bert", "encoder", f"layer_{i}"), f"{prefix}encoder.layer.{i}"
        for name in ("query", "key", "value"):
            table += _linear(ours + ("attention", name), f"{hf}.attention.self.{name}")
        table += _linear(ours + ("attention", "output"), f"{hf}.attention.output.dense")
        table += _norm(ours + ("attention", "layer_norm"), f"{hf}.attention.output.LayerNorm")
        table += _linear(ours + ("feed_forward", "intermediate"), f"{hf}.intermediate.dense")
        table += _linear(ours + ("feed_forward", "output"), f"{hf}.output.dense")
        table += _norm(ours + ("feed_forward", "layer_norm"), f"{hf}.output.LayerNorm")
    if pooler:
        table += _linear(("bert", "pooler", "dense"), f"{prefix}pooler.dense")
    if "predictions" in groups:
        table += _linear(("predictions", "dense"), "cls.predictions.transform.dense")
        table += _norm(("predictions", "layer_norm"), "cls.predictions.transform.LayerNorm")
        table.append(Entry(("predictions", "bias"), "cls.predictions.bias", False))
        if not config.tie_word_embeddings:
            table.append(Entry(("predictions", "decoder", "kernel"),
                               "cls.predictions.decoder.weight", True))
    if "seq_relationship" in groups:
        table += _linear(("seq_relationship",), "cls.seq_relationship")
    if "classifier" in groups:
        table += _linear(("classifier",), "classifier")
    if "qa_outputs" in groups:
        table += _linear(("qa_outputs",), "qa_outputs")
    return table


# Old TF-converted checkpoints name LayerNorm parameters gamma/beta; transformers renames them too.
_ALIASES = ((".LayerNorm.gamma", ".LayerNorm.weight"), (".LayerNorm.beta", ".LayerNorm.bias"))
_POOLER = ("bert", "pooler")


def expected_shapes(config: BertConfig, architecture: str) -> dict[tuple, tuple]:
    """Flat {our path: shape} of the architecture's params tree, without allocating it."""
    module = ARCHITECTURES[architecture][0](config)
    ids = jnp.zeros((1, 1, 2) if architecture == "BertForMultipleChoice" else (1, 2), jnp.int32)
    shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), ids))["params"]
    if isinstance(module, BertModel):
        shapes = {"bert": shapes}
    return {k: v.shape for k, v in traverse_util.flatten_dict(shapes).items()}


# -- reading ------------------------------------------------------------------------------------

def named_architecture(directory: str):
    """The first name in `directory`/config.json's "architectures", or None: it tells apart
    architectures whose parameter trees look alike (task_models.choose_architecture)."""
    config = _read_json(os.path.join(directory, CONFIG))
    names = config.get("architectures") if isinstance(config, dict) else None
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, ValueError) as e:
        raise BertJaxError(f"{path}: not readable JSON ({e})") from None
    try:
        return json_limits.loads(text, path)
    except json.JSONDecodeError as e:
        raise BertJaxError(f"{path}: not readable JSON ({e})") from None


def load_hf(path: str) -> tuple[BertConfig, dict]:
    """A Hugging Face BERT directory → (config, params) with params["bert"] the encoder.

    Accepts BertModel (no prefix), BertForPreTraining / BertForMaskedLM (`bert.` prefix,
    `cls.*`, tied decoder present or omitted) and the BertFor{Sequence,Token}Classification,
    QuestionAnswering and MultipleChoice task models; config.json's "architectures" tells the
    `classifier` ones apart. A BertForMaskedLM checkpoint has no pooler; ours gets a freshly
    initialised one (logged). Question answering and token classification have none (older
    releases saved an unused one: ignored, as transformers does); any other model needs it.
    """
    if not os.path.isdir(path):
        raise BertJaxError(f"{path}: {missing_dir_reason(path)}")
    config = BertConfig.from_json_file(os.path.join(path, CONFIG))
    state = read_state_dict(path)
    weights = os.path.join(path, "<weights>")
    for old, new in _ALIASES:
        state = {k.replace(old, new) if k.endswith(old) else k: v for k, v in state.items()}
    state = {k: v for k, v in state.items() if not k.endswith("embeddings.position_ids")}
    prefix = "bert." if any(k.startswith("bert.") for k in state) else ""
    check_layers(config, len({k[len(prefix):].split(".")[2] for k in state
                              if k.startswith(f"{prefix}encoder.layer.")}), path)
    groups = {"bert"}
    for group, start in (("predictions", "cls.predictions."),
                         ("seq_relationship", "cls.seq_relationship."),
                         ("classifier", "classifier."), ("qa_outputs", "qa_outputs.")):
        if any(k.startswith(start) for k in state):
            groups.add(group)
    pooler = [k for k in state if k.startswith(f"{prefix}pooler.")]
    width = state["classifier.weight"].shape[0] if "classifier.weight" in state else None
    architecture = choose_architecture(groups, bool(pooler), width, config.num_labels,
                                       named_architecture(path), where=path,
                                       problem_type=config.problem_type)
    if architecture in POOLER_FREE:
        for name in pooler:
            log.info("%s: ignoring %s (%s has no pooler)", path, name, architecture)
            del state[name]
    _drop_tied_copies(state, config, prefix, weights)

    shapes = expected_shapes(config, architecture)
    flat, missing = {}, []
    for entry in name_table(config, groups, prefix, architecture not in POOLER_FREE):
        if entry.hf not in state:
            missing.append(entry)
            continue
        array = state.pop(entry.hf)
        want = shapes[entry.ours][::-1] if entry.transpose else shapes[entry.ours]  # HF layout
        if array.shape != want:
            raise BertJaxError(f"{path}: tensor {entry.hf} has shape {tuple(array.shape)}, "
                               f"expected {tuple(want)} from config.json")
        array = array.T if entry.transpose else array
        flat[entry.ours] = np.ascontiguousarray(array)
    if state:
        names = sorted(state)
        raise BertJaxError(f"{path}: unexpected tensor(s) not in a BERT model: "
                           f"{', '.join(names[:5])}{' …' if len(names) > 5 else ''}")
    if missing and all(m.ours[:2] == _POOLER for m in missing) and "predictions" in groups \
            and "seq_relationship" not in groups:
        flat.update(_fresh_pooler(config))
        log.warning("%s: no pooler in this BertForMaskedLM checkpoint; initialised a new one", path)
    elif missing:
        names = [m.hf for m in missing]
        raise BertJaxError(f"{path}: missing tensor(s) {', '.join(names[:5])}"
                           f"{' …' if len(names) > 5 else ''} ({len(names)} in all)")
    assert set(flat) == set(shapes), set(shapes) ^ set(flat)  # the table covers the model
    return config, traverse_util.unflatten_dict(flat)


def _drop_tied_copies(state: dict, config: BertConfig, prefix: str, where: str) -> None:
    """Remove tensors HF stores twice, after checking they really are copies."""
    embeddings = state.get(f"{prefix}embeddings.word_embeddings.weight")
    weight, bias = "cls.predictions.decoder.weight", "cls.predictions.bias"
    decoder_bias = "cls.predictions.decoder.bias"
    if config.tie_word_embeddings:
        if weight in state:
            if embeddings is None or not np.array_equal(state[weight], embeddings):
                raise BertJaxError(f"{where}: {weight} differs from the word embeddings but "
                                   f"config.json ties them (set tie_word_embeddings to false)")
            del state[weight]
        if decoder_bias in state:
            copy = state.pop(decoder_bias)
            if not np.array_equal(copy, state.setdefault(bias, copy)):
                raise BertJaxError(f"{where}: {decoder_bias} differs from {bias}; tied BERT has "
                                   f"one output bias")
    elif decoder_bias in state:
        # Untied, transformers ≥ 5 keeps two biases and its forward adds only the decoder's;
        # the other one is then dead weight, ignored here as it is there.
        if bias in state and not np.array_equal(state[bias], state[decoder_bias]):
            log.warning("%s: ignoring %s, unused by an untied decoder (using %s)", where, bias,
                        decoder_bias)
        state[bias] = state.pop(decoder_bias)


def _fresh_pooler(config: BertConfig) -> dict:
    hidden = jnp.zeros((1, 1, config.hidden_size))
    params = Pooler(config).init(jax.random.key(0), hidden)["params"]
    return {_POOLER + k: np.asarray(v) for k, v in traverse_util.flatten_dict(params).items()}


# -- writing ------------------------------------------------------------------------------------

def to_state_dict(config: BertConfig, params, architecture=None
                  ) -> tuple[str, dict[str, np.ndarray]]:
    """Our params → (HF architecture name, HF state dict), validating every shape by path.

    `architecture` (say, from config.json) is needed only where the tree alone is ambiguous.
    """
    groups = frozenset(params)
    architecture = architecture_of(params, config, architecture)
    flat = {k: np.asarray(v) for k, v in traverse_util.flatten_dict(params).items()}
    check_shapes({k: v.shape for k, v in flat.items()}, config, architecture)
    prefix = "" if architecture == "BertModel" else "bert."
    state = {}
    for entry in name_table(config, groups, prefix, architecture not in POOLER_FREE):
        if architecture == "BertForMaskedLM" and entry.ours[:2] == _POOLER:
            continue  # HF's BertForMaskedLM has no pooler
        array = flat[entry.ours].astype(np.float32)
        state[entry.hf] = np.ascontiguousarray(array.T if entry.transpose else array)
    if "predictions" in groups and not config.tie_word_embeddings:
        state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].copy()  # see above
    return architecture, state


def check_shapes(flat: dict[tuple, tuple], config: BertConfig, architecture: str) -> None:
    """Refuses a params tree ({path: shape}) that is not `architecture` of `config`, naming the
    first parameter missing, misshapen or unexpected."""
    shapes = expected_shapes(config, architecture)
    for path, shape in shapes.items():
        if path not in flat:
            raise BertJaxError(f"params: missing {'/'.join(path)}")
        if tuple(flat[path]) != shape:
            raise BertJaxError(f"params: {'/'.join(path)} has shape {tuple(flat[path])}, "
                               f"expected {shape} from the config")
    extra = sorted("/".join(p) for p in set(flat) - set(shapes))
    if extra:
        raise BertJaxError(f"params: unexpected parameter(s) {', '.join(extra[:5])}")


def check_layers(config: BertConfig, layers: int, where: str) -> None:
    """config.json's num_hidden_layers against the layers the weights hold, before a model of
    that depth is traced (a crafted config could ask for millions)."""
    if config.num_hidden_layers > layers:
        raise BertJaxError(f"{where}: num_hidden_layers is {config.num_hidden_layers} in "
                           f"config.json, but the weights hold {layers} layer(s)")


def save_hf(path: str, config: BertConfig, params, vocab_files=(), overwrite=False,
            architecture=None) -> str:
    """Write config.json + model.safetensors (+ vocab files) that transformers loads cleanly.

    The tied decoder is omitted, as transformers itself saves it. Atomic: on any error nothing
    is left at `path`. `architecture` as in to_state_dict. Returns the architecture written.
    """
    from safetensors.numpy import save_file
    architecture, state = to_state_dict(config, params, architecture)
    with atomic_directory(path, overwrite) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG), architectures=[architecture])
        save_file(state, os.path.join(tmp, SAFETENSORS), metadata={"format": "pt"})
        copy_vocab_files(vocab_files, tmp)
    return architecture


def copy_vocab_files(files, directory: str) -> None:
    import shutil
    for f in files:
        shutil.copyfile(f, os.path.join(directory, os.path.basename(f)))
