"""Hugging Face Hub model ids where a model directory is taken: `org/name[@revision]` becomes the
local snapshot huggingface_hub keeps in its cache (HF_HUB_CACHE; HF_HUB_OFFLINE=1 reads only
the cache; tokens from its usual places, never printed). An existing local path always wins,
and only a string of the id's form is ever looked up on the Hub.
"""

from __future__ import annotations

import functools
import os
import re

from bert_jax.errors import BertJaxError

# org/name with an optional @revision (a branch, a tag or a commit hash)
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
# what a model directory needs: the config, the weights in any released format, the vocabulary
FILES = ["config.json", "*.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
         "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]


def split_id(name: str):
    """(repo, revision or None) of a Hub id `org/name[@revision]`, or None for anything else."""
    match = HUB_ID.match(name or "")
    return (match["repo"], match["revision"]) if match else None


def local_model(path: str) -> str:
    """`path` when it exists here; else, for a Hub id, the directory of its snapshot (fetched
    once into the Hub cache); else `path` unchanged (its reader reports it missing)."""
    if not path or os.path.exists(path) or split_id(path) is None:
        return path
    return _snapshot(path, _cache_dir(), _offline())


def _cache_dir() -> str:
    """The Hub cache as huggingface_hub reads it, HF_HUB_CACHE read now, not at its import."""
    from huggingface_hub import constants
    return os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE


def _offline() -> bool:
    from huggingface_hub import constants
    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in (
        "1", "ON", "YES", "TRUE")


@functools.lru_cache(maxsize=64)  # a job asks for its model's directory several times
def _snapshot(name: str, cache_dir: str, offline: bool) -> str:
    from huggingface_hub import errors, snapshot_download
    repo, revision = split_id(name)
    pinned = f"{repo}@{revision}" if revision else repo
    missing = f"{name}: no such local path, and the Hub model {pinned}"
    try:
        return snapshot_download(repo, revision=revision, cache_dir=cache_dir,
                                 allow_patterns=FILES, local_files_only=offline)
    except errors.RevisionNotFoundError:
        raise BertJaxError(f"{missing} has no revision {revision}") from None
    except (errors.RepositoryNotFoundError, errors.GatedRepoError):
        raise BertJaxError(f"{missing} was not found (or needs a token with access to "
                           f"it: `hf auth login`)") from None
    except errors.LocalEntryNotFoundError:
        why = "offline (HF_HUB_OFFLINE)" if offline else "the Hub could not be reached"
        raise BertJaxError(f"{missing} is not in the Hub cache {cache_dir}, and {why}") from None
    except (errors.HfHubHTTPError, OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BertJaxError(f"{missing} could not be fetched: {first}") from None
