"""What kind of directory a path is, where its vocabulary lives, and the name of every file a
workdir holds: the one place that knows.

  model directory (ours)   config.json + params/ (orbax) + vocabulary files
  Hugging Face directory   config.json + model.safetensors | model.safetensors.index.json |
                           pytorch_model.bin, + vocabulary files
  pretraining workdir      config.json + checkpoints/ (orbax train states) + vocab/ + export/
  fine-tuning workdir      checkpoints/ + model/ (the best epoch, a model directory) + export/
  GLUE workdir             data/ + runs/<task>/<run>/ (fine-tuning workdirs) + results.* +
                           submission/

Every reader (`load_pretrained`, inference, `config.init_from`, conversion) asks `kind`, `model_path` and
`vocab_dir` here instead of probing files itself.
"""

from __future__ import annotations

import os
from typing import Optional

from bert_jax.model_files import hub
from bert_jax.errors import BertJaxError

CONFIG = "config.json"
PARAMS = "params"  # a model directory's orbax params
CHECKPOINTS = "checkpoints"  # a workdir's orbax train states
VOCAB = "vocab"  # a pretraining workdir's vocabulary
BEST_MODEL = "model"  # a fine-tuning workdir's best epoch
EXPORT = "export"  # a workdir's Hugging Face export
SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN = (
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
VOCAB_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# the rest of a workdir (every job): the lock of the run using it, its metrics as written
LOCK = ".lock"  # held by the run using the workdir (runtime/workdir_lock.py); names its holder
METRICS_LOG = "metrics.jsonl"  # a line per logged step: train, held-out / validation metrics
TENSORBOARD = "tensorboard"  # the same metrics as TensorBoard event files
# a pretraining workdir
TRAIN_CONFIG = "train_config.json"  # the PretrainConfig of the run
TIME_BUDGET = "time_budget.json"  # the training time spent, for a time-budgeted run's resume
# a fine-tuning workdir
FINETUNE_CONFIG = "finetune_config.json"  # the FinetuneConfig of the run
LABELS = "labels.json"  # the class / tag names, in the head's order
EPOCHS = "epochs.json"  # validation scores per epoch (a resumed run skips these epochs)
RESULT = "metrics.json"  # the best epoch's validation and test scores
PREDICTIONS = "predictions.json"  # the best epoch's validation predictions (question answering)
# a GLUE workdir (`bert-jax glue`): a fine-tuning workdir per run, and what they add up to
GLUE_SETTINGS = "glue_settings.json"  # the settings every run shares (a resume must match)
GLUE_DATA = "data"  # data/<task>/<split>.jsonl: the splits as read, one row layout
GLUE_DATA_SOURCE = "source.json"  # where data/<task> was read from
GLUE_RUNS = "runs"  # runs/<task>/lr<rate>-seed<seed>: one fine-tuning workdir each
GLUE_RUN_SCORES = "glue_scores.json"  # a finished run's official dev scores
GLUE_SUBMITTED = "submitted.json"  # runs/submitted.json: the run each submission file is from
GLUE_RESULTS = ("results.json", "results.md")  # the table, the average, every run's scores
SUBMISSION = "submission"  # the test predictions in the GLUE server's files

MODEL_DIR, HF_DIR = "model directory", "Hugging Face directory"
PRETRAIN_WORKDIR, FINETUNE_WORKDIR = "pretraining workdir", "fine-tuning workdir"


def _has(path: str, *names: str, directory: bool = False) -> bool:
    check = os.path.isdir if directory else os.path.isfile
    return all(check(os.path.join(path, n)) for n in names)


def kind(path: str) -> Optional[str]:
    """MODEL_DIR, HF_DIR, PRETRAIN_WORKDIR, FINETUNE_WORKDIR, or None for anything else."""
    if not os.path.isdir(path):
        return None
    if _has(path, CONFIG) and _has(path, PARAMS, directory=True):
        return MODEL_DIR
    if kind(os.path.join(path, BEST_MODEL)) == MODEL_DIR:
        return FINETUNE_WORKDIR
    if _has(path, CONFIG) and _has(path, CHECKPOINTS, directory=True):
        return PRETRAIN_WORKDIR
    if any(_has(path, f) for f in (SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN)):
        return HF_DIR
    return None


def require_kind(path: str) -> str:
    """kind(path), or a one-line error saying what was expected there."""
    found = kind(path)
    if found is not None:
        return found
    if not os.path.isdir(path):
        raise BertJaxError(f"{path}: " + ("not a directory (expected a model directory)"
                                          if os.path.exists(path) else "no such model directory"))
    raise BertJaxError(f"{path}: neither a bert_jax model directory ({CONFIG} + {PARAMS}/), a "
                       f"workdir ({CHECKPOINTS}/) nor a Hugging Face one ({CONFIG} + "
                       f"{SAFETENSORS} or {TORCH_BIN})")


def model_path(path: str) -> str:
    """The directory holding the model itself: a fine-tuning workdir's best epoch, else path."""
    return os.path.join(path, BEST_MODEL) if kind(path) == FINETUNE_WORKDIR else path


def vocab_dir(path: str) -> str:
    """The directory holding a model's vocabulary files (vocab.txt / tokenizer.json); a Hub id's
    is its snapshot's."""
    path = hub.local_model(path)
    found = kind(path)
    if found == PRETRAIN_WORKDIR or (found is None and os.path.isdir(os.path.join(path, VOCAB))):
        return os.path.join(path, VOCAB)
    return model_path(path)


def vocab_files(path: str) -> list[str]:
    """The vocabulary files of the model at `path`, to copy beside exported weights."""
    directory = vocab_dir(path)
    return [os.path.join(directory, n) for n in VOCAB_FILES
            if os.path.isfile(os.path.join(directory, n))]


def checkpoint_dir(workdir: str, directory: Optional[str] = None) -> str:
    """Where a run keeps its orbax checkpoints: `directory` when it is set elsewhere (shared
    storage for several processes), else WORKDIR/checkpoints."""
    return directory or os.path.join(workdir, CHECKPOINTS)


def latest_checkpoint_step(workdir: str, directory: Optional[str] = None) -> Optional[int]:
    """The newest committed checkpoint step of a workdir (or of its checkpoint `directory`,
    when that is elsewhere), or None."""
    steps = complete_steps(checkpoint_dir(workdir, directory))
    return steps[-1] if steps else None


def complete_steps(directory: str) -> list[int]:
    """The committed checkpoint steps in an orbax `directory`, oldest first; read from the
    directory names alone (a half-written save is still named `N.orbax-checkpoint-tmp`)."""
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(int(n) for n in names if n.isdigit())
