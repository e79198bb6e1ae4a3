"""Hub datasets pinned by revision: `name@revision` (a branch, a tag or a commit hash) wherever a
`datasets` hub name is taken (`--dataset`, config.train_dataset, GLUE's --hub-dataset). The
revision stays part of the name, so every cache keyed on the name (prepared pretraining data,
GLUE's data/<task>) is keyed on the revision too: a pinned run never reads another revision's
rows."""

from __future__ import annotations

import os
from typing import Optional


def split_revision(name: str) -> tuple[str, Optional[str]]:
    """(dataset name, revision or None) of `name[@revision]`; a local path is never split."""
    base, sep, revision = name.rpartition("@")
    if not sep or not base or not revision or os.path.exists(name):
        return name, None
    return base, revision


def load_dataset(name: str, *args, **kwargs):
    """datasets.load_dataset of `name[@revision]`, the revision passed as its own argument."""
    import datasets  # imported here: it costs a second and ~130 MB
    base, revision = split_revision(name)
    if revision:
        kwargs["revision"] = revision
    return datasets.load_dataset(base, *args, **kwargs)
