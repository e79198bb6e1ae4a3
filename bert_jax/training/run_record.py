"""A workdir holds one run: its saved config, compared with the config of every resume.

The saved config (train_config.json, finetune_config.json) holds the run's config fields, what
they were launched with (`inputs`: the model, the vocabulary, the training data, by digest) and
`resumes`, one entry per resume that changed something. A resume that changes a field outside
the config's RESUMABLE (what the run computes: data, vocabulary, model, seed, objective, masking,
optimiser and its rates, batch, lengths, task, labels, initial checkpoint…) is refused in one
line naming up to three differences, before anything in the workdir is written; a change of a
resumable field (train longer, log or checkpoint more often) is logged in one line and recorded.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Optional

from bert_jax.model_files import atomic
from bert_jax.resources import portable
from bert_jax.model_files.paths import complete_steps
from bert_jax.errors import BertJaxError
from bert_jax.training.config_files import migrate

log = logging.getLogger("bert_jax")
INPUTS, RESUMES = "inputs", "resumes"  # the saved config's keys beside the config's fields


def inputs_of(launch_items: dict) -> dict:
    """What a run was launched with beyond its config fields: the launch items (multihost)
    but the config's (compared field by field) and the code's (a fix may resume a run)."""
    return {k: v for k, v in launch_items.items()
            if not k.startswith("config.") and k != "the code"}


def read(path: str) -> Optional[dict]:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_resume(workdir: str, path: str, cfg, inputs: Optional[dict], resumable: tuple,
                 checkpoints: str) -> Optional[dict]:
    """The record to save for this launch (None: leave the saved one as it is). A run whose
    `checkpoints` directory exists resumes (from its latest step, if it has one); else it
    starts afresh and the record is the new config. A refused change raises before anything is
    written. `inputs` None checks the config fields alone, quietly (a first look before the data
    is read: a refused run stops before slow work)."""
    quiet, inputs = inputs is None, inputs or {}
    fields = dataclasses.asdict(cfg)
    saved = read(path) if os.path.isdir(checkpoints) else None
    if saved is None:
        return {**fields, INPUTS: inputs, RESUMES: []}
    saved = migrate(saved, getattr(cfg, "RENAMED", {}))  # fields renamed since it was saved
    before = {**{k: v for k, v in saved.items() if k not in (INPUTS, RESUMES)},
              **saved.get(INPUTS, {})}
    now = {**fields, **inputs}
    # bundled data compares by its name in the package, not where the package lies today
    changed = {k: (before[k], now[k]) for k in now
               if k in before and portable(before[k]) != portable(now[k])}
    refused = [k for k in changed if k not in resumable]
    if refused:
        shown = "; ".join(f"{_name(k)}: {_value(changed[k][0])} there, {_value(changed[k][1])} "
                          f"here" for k in refused[:3])
        more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
        raise BertJaxError(f"{workdir}: holds a run with other settings ({shown}{more}); a "
                           f"resumed run must compute what it started: use a new workdir, or "
                           f"the saved settings ({os.path.basename(path)})")
    if not changed or quiet:
        return None
    steps = complete_steps(checkpoints)
    step = steps[-1] if steps else 0
    log.info("resuming from step %d with %s", step, ", ".join(
        f"{_name(k)} {_value(a)} → {_value(b)}" for k, (a, b) in changed.items()))
    resumes = saved.get(RESUMES, []) + [{
        "step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "changed": {k: list(v) for k, v in changed.items()}}]
    return {**fields, INPUTS: saved.get(INPUTS, inputs), RESUMES: resumes}


def save(path: str, record: Optional[dict]) -> None:
    if record is not None:
        atomic.write_json(path, record)


def _name(key: str) -> str:
    return key if " " in key else f"config.{key}"  # inputs are named in words


def _value(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:197] + "…"  # paths are shown whole
