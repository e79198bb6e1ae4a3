"""Model directories: ours (config.json + orbax params + vocab) and Hugging Face's, read alike.

`load_pretrained(path)` is the one entry point scripts use to get (config, params) from any
kind of directory checkpoints.paths knows: ours, Hugging Face's, or a workdir.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import jax
import numpy as np

from bert_jax.checkpoints import hub, paths
from bert_jax.checkpoints.atomic import atomic_directory
from bert_jax.checkpoints.huggingface import (copy_vocab_files, load_hf, named_architecture,
                                              to_state_dict)
from bert_jax.errors import BertJaxError
from bert_jax.models.config import BertConfig

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
    import orbax.checkpoint as ocp
    config = BertConfig.from_json_file(os.path.join(path, paths.CONFIG))
    params_path = os.path.abspath(os.path.join(path, paths.PARAMS))
    try:
        with ocp.StandardCheckpointer() as checkpointer:
            params = checkpointer.restore(params_path)
    except Exception as e:  # orbax raises many kinds for a damaged directory
        raise BertJaxError(f"{params_path}: not a readable orbax checkpoint "
                           f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                           ) from None
    params = jax.tree.map(np.asarray, params)
    try:  # params must fit config.json: names the first mismatch
        to_state_dict(config, params, named_architecture(path))
    except BertJaxError as e:
        raise BertJaxError(f"{params_path}: does not fit config.json: "
                           f"{str(e).removeprefix('params: ')}") from None
    return config, params


def load_pretrained(path: str) -> tuple[BertConfig, dict]:
    """(config, params) from our model directory, a pretraining workdir (its latest checkpoint),
    a fine-tuning workdir (its best epoch) or a Hugging Face BERT directory; or a Hub id
    `org/name[@revision]` naming one (checkpoints/hub.py; a local path wins).

    params["bert"] always holds the BertModel parameters; heads sit under their own keys.
    """
    path = hub.local_model(path)
    found = paths.require_kind(path)
    if found == paths.PRETRAIN_WORKDIR:
        config = BertConfig.from_json_file(os.path.join(path, paths.CONFIG))
        _, params = latest_checkpoint_params(path)
        return config, params
    if found == paths.HF_DIR:
        return load_hf(path)
    return load_model_dir(paths.model_path(path))


def latest_checkpoint_params(workdir: str, directory: Optional[str] = None):
    """(step, params) of a workdir's latest training checkpoint (in its checkpoint
    `directory`, when that is elsewhere), as host numpy arrays.

    Reads on one device whatever mesh wrote it, so any process can load any run.
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
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                              meta)
        tree = manager.restore(step, args=ocp.args.StandardRestore(target))
    return step, jax.tree.map(np.asarray, tree["params"])


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
        merged[group] = jax.tree.map(lambda x: np.asarray(x, np.float32), loaded[group])
    for group in sorted(set(loaded) - set(fresh)):
        log.warning("%s: ignoring its %s parameters (not part of this model)", path, group)
    return merged


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
