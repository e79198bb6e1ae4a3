"""A Hugging Face directory's weight files read as untrusted data: every name, dtype and path is
checked (from the safetensors header, before any tensor is allocated) and refused in one line.

A model directory may come from anywhere: its index could name a shard outside the directory, a
"weight" could be an integer or boolean tensor, and a pytorch_model.bin could hold anything
`torch.load(weights_only=True)` accepts. Only floating-point tensors are weights; the one
integer tensor the format has, `embeddings.position_ids` (a buffer older releases saved), is
kept for load_hf to drop.
"""

from __future__ import annotations

import json
import os

import numpy as np

from bert_jax import json_limits
from bert_jax.model_files.paths import SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN
from bert_jax.errors import BertJaxError

_INTEGER_BUFFERS = ("position_ids",)  # the format's own integer tensors
_FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")  # safetensors' names of floating dtypes


def read_state_dict(directory: str) -> dict[str, np.ndarray]:
    """The checkpoint's tensors as numpy; floating tensors upcast to float32 (our param dtype)."""
    if not os.path.isdir(directory):
        raise BertJaxError(f"{directory}: {missing_dir_reason(directory)}")
    path = os.path.join(directory, SAFETENSORS)
    index = os.path.join(directory, SAFETENSORS_INDEX)
    if os.path.isfile(path):
        tensors = _read_safetensors(path)
    elif os.path.isfile(index):
        tensors = {}
        for shard in shards(index, directory):
            tensors.update(_read_safetensors(shard))
    elif os.path.isfile(os.path.join(directory, TORCH_BIN)):
        tensors = _read_torch_bin(os.path.join(directory, TORCH_BIN))
    else:
        raise BertJaxError(f"{directory}: no weights found (expected {SAFETENSORS}, "
                           f"{SAFETENSORS_INDEX} or {TORCH_BIN})")
    return {k: v.astype(np.float32) if np.issubdtype(v.dtype, np.floating) or v.dtype.name ==
            "bfloat16" else v for k, v in tensors.items()}


def missing_dir_reason(path: str) -> str:
    return "not a directory (expected a model directory)" if os.path.exists(path) else \
        "no such directory"


def shards(index: str, directory: str) -> list[str]:
    """The shard files a safetensors index names, each a file inside `directory`."""
    try:
        with open(index, encoding="utf-8") as f:
            data = json_limits.loads(f.read(), index)
    except (OSError, ValueError) as e:
        if isinstance(e, BertJaxError):
            raise
        raise BertJaxError(f"{index}: not readable JSON ({e})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise BertJaxError(f"{index}: expected an object with a non-empty \"weight_map\" "
                           f"(tensor name → shard file), got {type(data).__name__}")
    root = os.path.realpath(directory)
    files = []
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise BertJaxError(f"{index}: weight_map[{name!r}]: expected a shard file name, got "
                               f"{type(shard).__name__}")
        file = os.path.realpath(os.path.join(directory, shard))
        if os.path.dirname(file) != root:
            raise BertJaxError(f"{index}: weight_map[{name!r}]: {shard!r} is not a file in "
                               f"{directory}")
        files.append(file)
    return sorted(set(files))


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
    from safetensors import safe_open
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: weights file not found")
    try:
        with safe_open(path, "numpy") as f:  # reads the header only
            for name in f.keys():
                dtype = f.get_slice(name).get_dtype()
                _check_dtype(path, name, dtype, dtype in _FLOAT_DTYPES)
            return {name: f.get_tensor(name) for name in f.keys()}
    except BertJaxError:
        raise
    except Exception as e:  # SafetensorError, OSError, bad header JSON: all mean a broken file
        raise BertJaxError(f"{path}: not a valid safetensors file ({e})") from None


def _read_torch_bin(path: str) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise BertJaxError(f"{path}: reading pytorch_model.bin needs torch (pip install "
                           f"'bert-jax[convert]'); safetensors checkpoints do not") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise BertJaxError(f"{path}: not a readable PyTorch checkpoint ({e})") from None
    if not isinstance(state, dict):
        raise BertJaxError(f"{path}: expected a state dict, got {type(state).__name__}")
    for name, value in state.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise BertJaxError(f"{path}: expected tensor names → tensors, got {name!r}: "
                               f"{type(value).__name__}")
        _check_dtype(path, name, str(value.dtype).removeprefix("torch."),
                     value.is_floating_point())
    return {k: (v.float() if v.is_floating_point() else v).numpy() for k, v in state.items()}


def _check_dtype(path: str, name: str, dtype: str, floating: bool) -> None:
    if not floating and not name.endswith(_INTEGER_BUFFERS):
        raise BertJaxError(f"{path}: tensor {name} is {dtype}; weights must be floating point")
