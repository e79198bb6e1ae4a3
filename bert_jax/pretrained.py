"""Model directories: ours (config.json + orbax params + vocab) and Hugging Face's, read alike.

`load_pretrained(path)` is the one entry point scripts use to get (config, params) from either.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from bert_jax.config import BertConfig
from bert_jax.convert import (ARCHITECTURES, SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN,
                              copy_vocab_files, load_hf, to_state_dict)
from bert_jax.errors import BertJaxError
from bert_jax.fileio import atomic_directory

PARAMS_DIR = "params"


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
    to_state_dict(config, params)  # params must fit config.json: names the first mismatch
    return config, params


def load_pretrained(path: str) -> tuple[BertConfig, dict]:
    """(config, params) from our model directory or a Hugging Face BERT directory.

    params["bert"] always holds the BertModel parameters; heads sit under their own keys.
    """
    if not os.path.isdir(path):
        raise BertJaxError(f"{path}: no such model directory")
    if is_model_dir(path):
        return load_model_dir(path)
    if is_hf_dir(path):
        return load_hf(path)
    raise BertJaxError(f"{path}: neither a bert_jax model directory (config.json + {PARAMS_DIR}/) "
                       f"nor a Hugging Face one (config.json + {SAFETENSORS} or {TORCH_BIN})")


def architecture_of(params) -> str:
    return ARCHITECTURES.get(frozenset(params), "unknown")
