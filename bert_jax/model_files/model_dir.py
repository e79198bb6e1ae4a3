"""Model directories: ours (config.json + orbax params + vocab) and Hugging Face's, read alike.

`load_pretrained(path)` is the one entry point scripts use to get (config, params) from any
kind of directory model_files/paths.py knows: ours, Hugging Face's, or a workdir.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.model_files import hub, paths
from bert_jax.model_files.atomic import atomic_directory
from bert_jax.model_files.huggingface import (check_layers, check_shapes, copy_vocab_files,
                                              load_hf, named_architecture, to_state_dict)
from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig
from bert_jax.models.task_models import architecture_of

log = logging.getLogger(__name__)

def save_model_dir(path: str, config: BertConfig, params, vocab_files=(), overwrite=False,
                   architecture=None) -> None:
    """Write our model directory atomically: config.json (with "architectures"), params/
    (orbax), vocab files. `architecture`: needed only where the tree is ambiguous (see
    task_models.choose_architecture)."""
    import orbax.checkpoint as ocp
    # validates the architecture, groups and every shape first
    architecture, _ = to_state_dict(config, params, architecture)
    params = jax.tree.map(np.asarray, params)
    with atomic_directory(path, overwrite) as tmp:
        config.to_json_file(os.path.join(tmp, paths.CONFIG), architectures=[architecture])
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.save(os.path.join(tmp, paths.PARAMS), params)
            checkpointer.wait_until_finished()
        copy_vocab_files(vocab_files, tmp)


def load_model_dir(path: str) -> tuple[BertConfig, dict]:
    """Our model directory → (config, params). The params' metadata (names, shapes, dtypes) is
    checked against config.json before anything is allocated: orbax's compressed chunks let a
    few KB of data claim arrays of any size."""
    import orbax.checkpoint as ocp
    config = BertConfig.from_json_file(os.path.join(path, paths.CONFIG))
    params_path = os.path.abspath(os.path.join(path, paths.PARAMS))
    with _unreadable_as_one_line(params_path), ocp.StandardCheckpointer() as checkpointer:
        meta = _plain(checkpointer.metadata(params_path).item_metadata)
        if not isinstance(meta, dict) or not meta:
            raise ValueError("no parameter tree in its metadata")
    try:
        _check_metadata(config, meta, named_architecture(path))
    except BertJaxError as e:
        raise BertJaxError(f"{params_path}: does not fit config.json: "
                           f"{str(e).removeprefix('params: ')}") from None
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                          meta)
    with _unreadable_as_one_line(params_path), ocp.StandardCheckpointer() as checkpointer:
        params = checkpointer.restore(params_path, target)
    return config, jax.tree.map(np.asarray, params)


@contextlib.contextmanager
def _unreadable_as_one_line(params_path: str):
    """orbax's errors for a damaged directory (of many kinds) as our one line, and its warnings
    about one (a log line before ours) left out."""
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        yield
    except Exception as e:  # noqa: BLE001
        raise BertJaxError(f"{params_path}: not a readable orbax checkpoint "
                           f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                           ) from None
    finally:
        absl.setLevel(level)


def _plain(tree):
    """orbax's tree metadata as nested dicts of its leaves' ArrayMetadata."""
    return {k: _plain(v) for k, v in tree.items()} if hasattr(tree, "items") else tree


def _check_metadata(config: BertConfig, meta: dict, name: Optional[str]) -> None:
    """Floating-point params of the architecture `config` describes, every shape as it says."""
    from flax import traverse_util
    flat = traverse_util.flatten_dict(meta)
    for key, leaf in flat.items():
        if not hasattr(leaf, "shape") or not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise BertJaxError(f"{'/'.join(key)} is {getattr(leaf, 'dtype', type(leaf))}; "
                               f"weights must be floating point")
    encoder = meta.get("bert", {}).get("encoder", {}) if isinstance(meta.get("bert"), dict) else {}
    check_layers(config, len(encoder), "params")
    check_shapes({k: v.shape for k, v in flat.items()}, config,
                 architecture_of(meta, config, name))


def load_pretrained(path: str) -> tuple[BertConfig, dict]:
    """(config, params) from our model directory, a pretraining workdir (its latest checkpoint),
    a fine-tuning workdir (its best epoch) or a Hugging Face BERT directory; or a Hub id
    `org/name[@revision]` naming one (model_files/hub.py; a local path wins).

    params["bert"] always holds the BertModel parameters; heads sit under their own keys.
    """
    path = hub.local_model(path)
    found = paths.require_kind(path)
    if found == paths.PRETRAIN_WORKDIR:
        config = BertConfig.from_json_file(os.path.join(path, paths.CONFIG))
        _, params = latest_checkpoint_params(path, config=config)
        return config, params
    if found == paths.HF_DIR:
        return load_hf(path)
    return load_model_dir(paths.model_path(path))


def latest_checkpoint_params(workdir: str, directory: Optional[str] = None,
                             config: Optional[BertConfig] = None):
    """(step, params) of a workdir's latest training checkpoint (in its checkpoint
    `directory`, when that is elsewhere), as host numpy arrays.

    Reads on one device whatever mesh wrote it, so any process can load any run. With the
    workdir's `config`, its metadata is checked first, as load_model_dir's (a workdir given as
    --init may come from anywhere): params that fit it, an optimizer state no larger than Adam's.
    """
    import orbax.checkpoint as ocp
    directory = os.path.abspath(paths.checkpoint_dir(workdir, directory))
    options = ocp.CheckpointManagerOptions(read_only=True)
    with ocp.CheckpointManager(directory, options=options,
                               item_handlers=ocp.StandardCheckpointHandler()) as manager:
        step = manager.latest_step()
        if step is None:
            raise BertJaxError(f"{directory}: no complete checkpoint")
        meta = manager.item_metadata(step)
        meta = getattr(meta, "tree", meta)
        if config is not None:
            _check_train_state(config, _plain(meta), f"{directory}/{step}")
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                              meta)
        tree = manager.restore(step, args=ocp.args.StandardRestore(target))
    return step, jax.tree.map(np.asarray, tree["params"])


def _size(tree) -> int:
    return sum(int(np.prod(getattr(m, "shape", ()))) for m in jax.tree.leaves(tree))


def _check_train_state(config: BertConfig, meta, where: str) -> None:
    """A training checkpoint's metadata: params that fit `config`, and no more than Adam's two
    moments (and a few counters) besides them, before any of it is allocated."""
    params = meta.get("params") if isinstance(meta, dict) else None
    if not isinstance(params, dict):
        raise BertJaxError(f"{where}: not a training checkpoint (no params)")
    try:
        _check_metadata(config, params, None)
    except BertJaxError as e:
        raise BertJaxError(f"{where}: does not fit config.json: "
                           f"{str(e).removeprefix('params: ')}") from None
    if _size(meta) > 3 * _size(params) + 1024:
        raise BertJaxError(f"{where}: holds {_size(meta):,} numbers, more than a model of "
                           f"{_size(params):,} parameters and its Adam moments")


def init_from(path: str, fresh: dict) -> dict:
    """`fresh` params with every group the model at `path` has replaced by its weights."""
    return merge_params(load_pretrained(path)[1], fresh, path)


def merge_params(loaded: dict, fresh: dict, path: str) -> dict:
    """`fresh` params with every group of `loaded` (read from `path`) swapped in, shapes checked.

    Groups the checkpoint lacks (say, pretraining heads on a released encoder) keep their fresh
    init; groups only the checkpoint has (say, a classifier) are left out. Both are logged.
    `fresh` may hold jax.ShapeDtypeStruct leaves (jax.eval_shape's): those it keeps are the
    ones the caller still has to draw.
    """
    from flax import traverse_util
    merged = {}
    loaded = dict(loaded)
    if isinstance(loaded.get("bert"), dict) and isinstance(fresh.get("bert"), dict):
        loaded["bert"] = _match_pooler(loaded["bert"], fresh["bert"], path)
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
        merged[group] = jax.tree.map(_as_float32, loaded[group])
    for group in sorted(set(loaded) - set(fresh)):
        log.warning("%s: ignoring its %s parameters (not part of this model)", path, group)
    return merged


def _as_float32(leaf):
    """A loaded weight as float32; a fresh placeholder (a pooler the checkpoint lacks) as is."""
    return leaf if isinstance(leaf, jax.ShapeDtypeStruct) else np.asarray(leaf, np.float32)


def _match_pooler(loaded: dict, fresh: dict, path: str) -> dict:
    """The encoder's pooler follows the model being built: question answering and token
    classification have none (HF's add_pooling_layer=False), so a pretrained one is left out;
    a model that needs one, started from a checkpoint of those, gets a fresh one (as HF)."""
    if "pooler" in loaded and "pooler" not in fresh:
        log.info("%s: leaving out its pooler (this model has none)", path)
        return {k: v for k, v in loaded.items() if k != "pooler"}
    if "pooler" in fresh and "pooler" not in loaded:
        log.warning("%s: has no pooler; it starts from a fresh init", path)
        return dict(loaded, pooler=fresh["pooler"])
    return loaded
