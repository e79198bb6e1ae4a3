"""A GLUE workdir's data: each task's splits read once (glue/reading.py, from a folder in
the download's layout or the hub) into WORKDIR/data/<task>/<split>.jsonl, the files every
fine-tuning run of the task reads; the training split cut to --max-train-examples rows.

data/<task>/source.json, written last, records where they came from: a rerun reuses them, and a
rerun reading other data into the same workdir is refused (its runs were trained on these).
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from bert_jax.model_files import atomic, paths
from bert_jax.errors import BertJaxError
from bert_jax.glue import reading
from bert_jax.glue.benchmark import GlueTask

log = logging.getLogger("bert_jax")
OPTIONAL = ("diagnostic",)  # AX: predicted when the data has it, else left out with a warning
SUBSET_SEED = 0  # which training rows --max-train-examples keeps (sorted back into file order)


def source_of(data_dir: str, hub: str) -> str:
    return os.path.abspath(data_dir) if data_dir else f"hub:{hub}"


def prepare(task: GlueTask, data_dir: str, hub: str, max_train_examples: int, workdir: str
            ) -> dict[str, str]:
    """{split: jsonl path} of `task` under WORKDIR/data, read now or reused."""
    folder = os.path.join(workdir, paths.GLUE_DATA, task.name)
    stamp = {"source": source_of(data_dir, hub), "max_train_examples": max_train_examples}
    stamp_path = os.path.join(folder, paths.GLUE_DATA_SOURCE)
    saved = read_json(stamp_path, None)
    if saved is not None:
        if {k: saved.get(k) for k in stamp} != stamp:
            raise BertJaxError(
                f"{workdir}: its {task.name} runs were trained on {saved['source']} "
                f"(max_train_examples {saved['max_train_examples']}), this is "
                f"{stamp['source']} (max_train_examples {max_train_examples}); use a new "
                f"workdir")
        return {split: os.path.join(folder, f"{split}.jsonl") for split in saved["splits"]}
    written, counts = {}, {}
    for split in task.splits:
        try:
            rows = (reading.read_local(task, split, data_dir) if data_dir
                    else reading.read_hub(task, split, hub))
        except BertJaxError as e:
            if split not in OPTIONAL:
                raise
            log.warning("%s: no diagnostic set (AX.tsv is not written): %s", task.name, e)
            continue
        kept = rows.rows
        if split == "train" and 0 < max_train_examples < len(kept):
            rng = np.random.default_rng(SUBSET_SEED)
            kept = [kept[i] for i in np.sort(rng.choice(len(kept), max_train_examples,
                                                        replace=False))]
        written[split] = _write_jsonl(os.path.join(folder, f"{split}.jsonl"), kept)
        counts[split] = {"rows": len(kept), "read": len(rows.rows), "skipped": rows.skipped,
                         "from": rows.where}
    atomic.write_json(stamp_path, dict(stamp, splits=list(written), counts=counts))
    return written


def _write_jsonl(path: str, rows: list) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic.atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path


def read_rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_json(path: str, default):
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)
