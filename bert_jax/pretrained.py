"""Model directories: ours (config.json + orbax params + vocab) and Hugging Face's, read alike.

`load_pretrained(path)` is the one entry point scripts use to get (config, params) from either.
"""

from __future__ import annotations

import logging
import os

import jax
import numpy as np

from bert_jax import checkpoint
from bert_jax.config import BertConfig
from bert_jax.convert import (ARCHITECTURES, SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN,
                              copy_vocab_files, load_hf, to_state_dict)
from bert_jax.errors import BertJaxError
from bert_jax.fileio import atomic_directory

PARAMS_DIR = "params"
log = logging.getLogger(__name__)


def is_model_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, PARAMS_DIR)) and os.path.isfile(
        os.path.join(path, "config.json"))


def is_hf_dir(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f))
               for f in (SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN))


def save_model_dir(path: str, config: BertConfig, params, vocab_files=(), overwrite=False) -> None:
    """Write our model directory atomically: config.json, params/ (orbax), vocab files."""
    import orbax.checkpoint as ocp
    architecture, _ = to_state_dict(config, params)  # validates groups and every shape first
    params = jax.tree.map(np.asarray, params)
    with atomic_directory(path, overwrite) as tmp:
        config.to_json_file(os.path.join(tmp, "config.json"), architectures=[architecture])
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.save(os.path.join(tmp, PARAMS_DIR), params)
            checkpointer.wait_until_finished()
        copy_vocab_files(vocab_files, tmp)


def load_model_dir(path: str) -> tuple[BertConfig, dict]:
    import orbax.checkpoint as ocp
    config = BertConfig.from_json_file(os.path.join(path, "config.json"))
    params_path = os.path.abspath(os.path.join(path, PARAMS_DIR))
    try:
        with ocp.StandardCheckpointer() as checkpointer:
            params = checkpointer.restore(params_path)
    except Exception as e:  # orbax raises many kinds for a damaged directory
        raise BertJaxError(f"{params_path}: not a readable orbax checkpoint "
                           f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                           ) from None
    params = jax.tree.map(np.asarray, params)
    try:  # params must fit config.json: names the first mismatch
        to_state_dict(config, params)
    except BertJaxError as e:
        raise BertJaxError(f"{params_path}: does not fit config.json: "
                           f"{str(e).removeprefix('params: ')}") from None
    return config, params


def load_pretrained(path: str) -> tuple[BertConfig, dict]:
    """(config, params) from our model directory, a pretraining workdir (its latest checkpoint)
    or a Hugging Face BERT directory.

    params["bert"] always holds the BertModel parameters; heads sit under their own keys.
    """
    if not os.path.isdir(path):
        raise BertJaxError(f"{path}: " + ("not a directory (expected a model directory)"
                                          if os.path.exists(path) else "no such model directory"))
    if is_model_dir(path):
        return load_model_dir(path)
    if os.path.isdir(os.path.join(path, checkpoint.CHECKPOINTS)):
        config = BertConfig.from_json_file(os.path.join(path, "config.json"))
        _, params = checkpoint.latest_params(path)
        return config, params
    if is_hf_dir(path):
        return load_hf(path)
    raise BertJaxError(f"{path}: neither a bert_jax model directory (config.json + {PARAMS_DIR}/) "
                       f"nor a Hugging Face one (config.json + {SAFETENSORS} or {TORCH_BIN})")


def architecture_of(params) -> str:
    return ARCHITECTURES.get(frozenset(params), "unknown")


def init_from(path: str, fresh: dict) -> dict:
    """`fresh` params with every group the model at `path` has replaced by its weights."""
    return merge_params(load_pretrained(path)[1], fresh, path)


def merge_params(loaded: dict, fresh: dict, path: str) -> dict:
    """`fresh` params with every group of `loaded` (read from `path`) swapped in, shapes checked.

    Groups the checkpoint lacks (say, pretraining heads on a released encoder) keep their fresh
    init; groups only the checkpoint has (say, a classifier) are left out. Both are logged.
    """
    from flax import traverse_util
    merged = {}
    for group, params in fresh.items():
        if group not in loaded:
            log.warning("%s: has no %s parameters; they start from a fresh init", path, group)
            merged[group] = params
            continue
        want = traverse_util.flatten_dict(params)
        have = traverse_util.flatten_dict(loaded[group])
        for name, leaf in want.items():
            got = have.get(name)
            if got is None or got.shape != leaf.shape:
                raise BertJaxError(
                    f"{path}: {group}/{'/'.join(name)} has shape "
                    f"{None if got is None else tuple(got.shape)}, this model needs "
                    f"{tuple(leaf.shape)}")
        extra = sorted("/".join(k) for k in set(have) - set(want))
        if extra:
            raise BertJaxError(f"{path}: {group} has parameters this model lacks: "
                               f"{', '.join(extra[:3])}")
        merged[group] = jax.tree.map(lambda x: np.asarray(x, np.float32), loaded[group])
    for group in sorted(set(loaded) - set(fresh)):
        log.warning("%s: ignoring its %s parameters (not part of this model)", path, group)
    return merged
