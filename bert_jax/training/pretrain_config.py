"""PretrainConfig: everything one pretraining run needs, saved as JSON beside its checkpoints.

A config file's `get_config()` returns one (see config_files); variants import a base file from
the same directory and `.replace(...)` fields.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import typing
from typing import Optional

from bert_jax import resources
from bert_jax.data.pretraining_batches import OBJECTIVES
from bert_jax.errors import BertJaxError
from bert_jax.training.config_files import (NONFINITE_POLICIES, apply_overrides, check_fields,
                                            run_config_file)
from bert_jax.training.initial_params import POSITION_INITS

log = logging.getLogger("bert_jax")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Everything one pretraining run needs; saved as JSON beside its checkpoints."""

    # model and initialisation
    model: str = "tiny"  # a BertConfig preset (tiny … large) or a path to a config.json
    init_from: str = ""  # model dir, HF dir, pretraining workdir or Hub id org/name[@revision]
    #   to start from ("" = scratch; a local path wins)
    dtype: str = "float32"  # computation dtype: float32 | bfloat16 (params stay float32)
    remat: bool = False  # recompute each layer in the backward pass: less memory, more time
    dropout: Optional[float] = None  # hidden and attention dropout; None keeps the model's (0.1)
    objective: str = "mlm+nsp"  # mlm+nsp: sentence pairs, MLM + NSP | mlm+sop: pairs in or out
    #   of order, MLM + ALBERT's sentence-order prediction | mlm: packed rows, MLM only
    position_init: str = "normal"  # normal (the original) | sinusoidal (a start, still learned)
    initializer_range: Optional[float] = None  # σ of the weights' init; None keeps the model's
    position_scale: float = 1.0  # the position embeddings' init times this
    mimetic_qk: float = 0.0  # > 0: query kernels start at this σ, key kernels as their copies
    #   (mimetic init: attention starts local, not uniform); 0: the original init
    mimetic_heads: int = 0  # of each layer's heads, the first this many start mimetic (0: all)
    mimetic_layers: int = 0  # of the layers, the first this many start mimetic (0: all)
    # data
    train_files: str = resources.bundled("austen/*.txt")  # UTF-8 text files, one document each
    documents: str = "file"  # "file": one document a file; "blank_line": split at blank lines
    sentence_per_line: bool = False  # text files hold one sentence a line (the original's format)
    text_field: str = "text"  # the text field of jsonl / parquet files and of train_dataset
    train_dataset: str = ""  # a `datasets` hub name (name@revision pins one) or local dir,
    #   streamed instead of train_files
    train_dataset_config: str = ""  # train_dataset's configuration name ("" = its default)
    train_dataset_split: str = "train"  # train_dataset's split
    prepare_workers: int = 0  # tokenising worker processes for data preparation (0 = CPU count)
    vocab: str = ""  # vocab.txt / tokenizer.json; "" trains one into WORKDIR/vocab
    vocab_size: int = 8192  # size of the vocabulary trained when `vocab` is ""
    lowercase: bool = True  # uncased model (lowercase + strip accents) for a trained vocab
    max_seq_length: int = 128  # tokens per example, [CLS] and [SEP]s included
    max_predictions_per_seq: int = 0  # masked positions per example (P); 0 = ceil(prob · L)
    masked_lm_prob: float = 0.15  # fraction of real tokens chosen for MLM (held out: always 0.15)
    whole_word_masking: bool = False  # choose all pieces of a word together
    short_seq_prob: float = 0.1  # chance of a shorter target length, as the original
    phase1_seq_length: int = 0  # > 0: the first phase1_share of the run at this length, then
    phase1_share: float = 0.9  # max_seq_length (the paper's 128 → 512, 90% / 10% of steps)
    dupe_factor: int = 1  # obsolete, ignored: pairs are redrawn every epoch (old files set it)
    eval_fraction: float = 0.02  # share of sentences held out, by document (or a document's tail)
    data_seed: int = 0  # seeds pair creation, the held-out split and the batch order
    # optimisation
    batch_size: int = 32  # global batch size (all devices, all processes)
    grad_accum_steps: int = 1  # micro-batches per step; each is batch_size / grad_accum_steps
    steps: int = 1000  # optimiser updates (with a time budget: the most it may take)
    time_budget_minutes: float = 0.0  # > 0: the rate decays to 0 with the clock, stop at the end
    learning_rate: float = 1e-4  # peak learning rate
    warmup_steps: int = 100  # linear warmup, then linear decay to 0 at `steps` (or the budget)
    decay_share: float = 1.0  # the rate decays over this last share of the run (1: all of it
    # after the warm-up; 0.2 holds the peak for the first 80%: warm-up–stable–decay)
    weight_decay: float = 0.01  # decoupled, on ≥2-D params only (not biases, not LayerNorm)
    optimizer: str = "adamw"  # adamw | lamb
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # global-norm clipping
    on_nonfinite: str = "stop"  # a NaN/Inf loss or gradient skips its update, then: stop | skip
    seed: int = 0  # seeds init, masking and dropout (fold_in(key, step))
    # bookkeeping
    log_every: int = 50  # steps between metric logs
    eval_every: int = 500  # steps between held-out evaluations (0 = only at the end)
    eval_batches: int = 20  # held-out batches per evaluation (0 = all)
    probe_file: str = ""  # a labelled text file (csv / jsonl …): at every evaluation a linear
    #   probe on the frozen, mean-pooled features (fit on half, MCC on the other half), logged
    #   as probe/<name> — whether what the run learns helps a task, while it trains
    probe_examples: int = 2000  # rows of probe_file used (the first ones)
    probe_text_column: str = "text"
    probe_label_column: str = "label"
    checkpoint_every: int = 500  # steps between checkpoints
    keep_checkpoints: int = 3  # checkpoints kept on disk
    checkpoint_dir: str = ""  # "" = WORKDIR/checkpoints; several processes need one they share

    def replace(self, **changes) -> "PretrainConfig":
        return dataclasses.replace(self, **changes)

    def predictions_per_seq(self, length: int = 0,
                            masked_lm_prob: Optional[float] = None) -> int:
        """P for examples of `length` tokens (default max_seq_length) masked at
        `masked_lm_prob` (default the config's): max_predictions_per_seq, or when that is 0
        ceil(prob · length), which never caps the round(prob · n_real) chosen."""
        prob = self.masked_lm_prob if masked_lm_prob is None else masked_lm_prob
        if self.max_predictions_per_seq and masked_lm_prob is None:
            return self.max_predictions_per_seq
        return max(1, math.ceil(prob * (length or self.max_seq_length)))


# The fields a resumed run may change (training/run_record.py): train longer, log, evaluate or
# checkpoint at other intervals, tokenise with other workers, keep checkpoints elsewhere. Every
# other field changes what the run computes, and a resume with another value is refused.
RESUMABLE = ("steps", "time_budget_minutes", "log_every", "eval_every", "eval_batches",
             "checkpoint_every", "keep_checkpoints", "checkpoint_dir", "prepare_workers",
             "probe_file", "probe_examples", "probe_text_column", "probe_label_column")
_POSITIVE = ("vocab_size", "max_seq_length", "batch_size", "grad_accum_steps", "steps",
             "log_every", "checkpoint_every", "keep_checkpoints", "probe_examples")
_NON_NEGATIVE = ("warmup_steps", "data_seed", "seed", "eval_every", "eval_batches",
                 "prepare_workers", "max_predictions_per_seq", "phase1_seq_length",
                 "mimetic_heads", "mimetic_layers")
HELDOUT_MASKED_LM_PROB = 0.15  # held-out masks: the paper's rate whatever the training one
_CHOICES = {"dtype": ("float32", "bfloat16"), "optimizer": ("adamw", "lamb"),
            "position_init": POSITION_INITS,
            "documents": ("file", "blank_line"), "on_nonfinite": NONFINITE_POLICIES}


def validate(cfg: PretrainConfig) -> PretrainConfig:
    """Refuse impossible values, naming the field; a warm-up longer than the run is shortened to
    it. Returns the config to run."""
    check_fields(cfg, at_least_one=_POSITIVE, non_negative=_NON_NEGATIVE, choices=_CHOICES,
                 fractions=("masked_lm_prob", "short_seq_prob", "eval_fraction")
                 + (("dropout",) if cfg.dropout is not None else ()),
                 positive=("learning_rate", "adam_eps", "max_grad_norm")
                 + ("position_scale",)
                 + (("initializer_range",) if cfg.initializer_range is not None else ()))
    if cfg.mimetic_qk < 0:
        raise BertJaxError(f"config.mimetic_qk: expected a standard deviation ≥ 0 (0 = off), "
                           f"got {cfg.mimetic_qk}")
    if not 0.0 < cfg.decay_share <= 1.0:
        raise BertJaxError(f"config.decay_share: expected a share in (0, 1], got "
                           f"{cfg.decay_share}")
    if not 0 <= cfg.time_budget_minutes < math.inf:
        raise BertJaxError(f"config.time_budget_minutes: expected minutes ≥ 0 (0 = none), got "
                           f"{cfg.time_budget_minutes}")
    if cfg.phase1_seq_length:
        if not 8 <= cfg.phase1_seq_length < cfg.max_seq_length:
            raise BertJaxError(f"config.phase1_seq_length: expected 0 (one phase) or a length "
                               f"from 8 to below max_seq_length ({cfg.max_seq_length}), got "
                               f"{cfg.phase1_seq_length}")
        if not 0.0 < cfg.phase1_share < 1.0:
            raise BertJaxError(f"config.phase1_share: expected a share in (0, 1), got "
                               f"{cfg.phase1_share}")
    if not 0.0 < cfg.masked_lm_prob:
        raise BertJaxError(f"config.masked_lm_prob: expected a value in (0, 1), got "
                           f"{cfg.masked_lm_prob}")
    if cfg.objective not in OBJECTIVES:
        raise BertJaxError(f"config.objective: expected {', '.join(OBJECTIVES)}, got "
                           f"{cfg.objective!r}")
    if not cfg.text_field:
        raise BertJaxError("config.text_field: expected a non-empty field name, got ''")
    if cfg.dupe_factor != 1:  # reset to 1, so validating the result again warns no more
        log.warning("config.dupe_factor: %d is ignored (set to 1): pairs are redrawn every "
                    "epoch from (data_seed, epoch), which is the original's dupe_factor "
                    "without multiplying the disk", cfg.dupe_factor)
        cfg = cfg.replace(dupe_factor=1)
    if cfg.warmup_steps > cfg.steps:  # a short smoke run of any config: warm up over all of it
        log.warning("config.warmup_steps: %d is more than config.steps (%d); warming up over "
                    "all %d steps", cfg.warmup_steps, cfg.steps, cfg.steps)
        cfg = cfg.replace(warmup_steps=cfg.steps)
    if cfg.batch_size % cfg.grad_accum_steps:
        raise BertJaxError(f"config.batch_size: {cfg.batch_size} does not split into "
                           f"{cfg.grad_accum_steps} micro-batches (config.grad_accum_steps)")
    return cfg


def prediction_cap(cfg: PretrainConfig) -> str:
    """A warning when an explicit max_predictions_per_seq masks fewer tokens than
    masked_lm_prob asks for ("" when it does not); the job logs it once its inputs are
    checked, so a bad input still fails in one line."""
    if 0 < cfg.max_predictions_per_seq < round(cfg.masked_lm_prob * cfg.max_seq_length):
        wanted = math.ceil(cfg.masked_lm_prob * cfg.max_seq_length)
        return (f"config.max_predictions_per_seq: {cfg.max_predictions_per_seq} caps the masked "
                f"tokens below masked_lm_prob {cfg.masked_lm_prob:g} of {cfg.max_seq_length} "
                f"tokens; 0 (or {wanted}) masks them all")
    return ""


def load_config(path: str, overrides: typing.Sequence[str] = ()) -> PretrainConfig:
    """Run `get_config()` of the Python file at `path`, then apply `FIELD=VALUE` overrides."""
    cfg = run_config_file(path)
    if not isinstance(cfg, PretrainConfig):
        raise BertJaxError(f"{path}: get_config() returns a {type(cfg).__name__}, not a "
                           f"PretrainConfig")
    return validate(apply_overrides(cfg, overrides))
