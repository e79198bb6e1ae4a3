"""FinetuneConfig: one fine-tuning run (any task of bert_jax/tasks), saved beside its checkpoints.

A config file's `get_config()` returns one; `FIELD=VALUE` overrides and keyword changes (the
`bert-jax finetune` flags) override fields. The optimisation fields match PretrainConfig's, so
optim.make_optimizer serves both (see `optimizer_settings`).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Optional

from bert_jax.errors import BertJaxError
from bert_jax.tasks import DEFAULT, TASKS
from bert_jax.training import config_files

HEAD_INITS = ("truncated_normal", "normal")  # google-research/bert's, transformers'


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Everything one fine-tuning run needs."""

    task: str = DEFAULT  # a name in bert_jax.tasks.TASKS (`bert-jax finetune --help` lists them)
    # model
    init_from: str = ""  # our model dir, a pretraining workdir, a Hugging Face dir or a Hub
    #   id org/name[@revision] (required; a local path wins); the flag --init
    dtype: str = "float32"  # computation dtype: float32 | bfloat16 (params stay float32)
    remat: bool = False  # recompute each layer in the backward pass: less memory, ~1/3 more time
    dropout: Optional[float] = None  # hidden and attention dropout while fine-tuning; None
    #   keeps the model's (its config.json: 0.1 in released BERTs, but the default pretraining
    #   run trains and exports at 0.0)
    head_init: str = "normal"  # the fresh head's kernel, σ = the model's initializer_range:
    #   normal (transformers' plain normal; CoNLL NER F1 +2.5 over truncated, 5 seeds a side:
    #   bench/RESULTS.md) | truncated_normal (at 2σ, google-research/bert's; 0.88σ rms);
    #   a head the init checkpoint already has is kept as is
    reinit_layers: int = 0  # > 0: the pooler and the top N encoder layers start at the
    #   model's own init, not the checkpoint's (Zhang et al. 2021, "Revisiting Few-sample BERT
    #   Fine-tuning": the top layers are the most task-specific to pretraining); same model
    reinit_attention: int = 0  # > 0: only the query and key projections of the top N layers
    #   start at the model's own init: their attention starts even ([CLS] reads every token)
    #   while values, feed-forward and embeddings keep what pretraining learned; same model
    rescale_embeddings: float = 0.0  # > 0: the embedding tables start scaled to this σ (e.g.
    #   0.02, the init's), the model's outputs unchanged (LayerNorm follows their sum): a
    #   pretrained table grown large moves as easily, relative to its size, as a fresh one
    layer_lr_decay: float = 1.0  # < 1: layer-wise rate decay (Sun et al. 2019): the head,
    #   pooler and top layer at the rate, each layer below at this times the one above, the
    #   embeddings at this^L (optim.layer_rate_decay); 1 = every parameter at the rate
    # data: a hub dataset, or local files (csv, tsv, json, jsonl, parquet)
    dataset: str = ""  # `datasets` hub name, e.g. "glue", "name@revision" pinned ("" = local files)
    dataset_config: str = ""  # its configuration, e.g. "sst2"
    train_file: str = ""
    validation_file: str = ""
    test_file: str = ""  # optional: scored once, with the best model, at the end
    text_column: str = "text"
    text_pair_column: str = ""  # second segment of sentence-pair tasks ("" = single text)
    label_column: str = "label"  # strings or integers; the label map is saved with the model
    max_seq_length: int = 128  # classification / multiple choice: longer texts are truncated
    #   (longest segment first); question answering and token classification: split in windows
    trim_padding: bool = True  # a training batch is cut to the bucket of its longest row
    #   (data/buckets.py: a multiple of 16 up to 128), not computed at max_seq_length: masked
    #   attention makes it the same function, only float order and dropout's draws differ;
    #   each bucket length compiles the step once. CoNLL-2003 batches are ~85% padding at 128
    # token classification: CoNLL text files (word first, tag last) or these list columns
    tokens_column: str = "tokens"
    tags_column: str = "tags"  # strings, or integers with ClassLabel names
    conll_column: int = -1  # the tag column of CoNLL text (token first): -1 the last, as
    #   CoNLL-2003's NER; 1 its part of speech, 2 its chunk
    # question answering (SQuAD json, or id/question/context/answers records)
    doc_stride: int = 128  # tokens shared by consecutive context windows (HF's stride)
    max_answer_length: int = 30  # in tokens
    n_best: int = 20  # start and end candidates per window
    version_2_with_negative: bool = False  # SQuAD 2.0: unanswerable questions (set by the data
    #   too: any example without an answer turns it on)
    null_score_threshold: float = 0.0  # v2: answer "" when null score − best span score > this
    # multiple choice (SWAG's columns): [CLS] context [SEP] start + " " + ending_i [SEP]
    choice_context_column: str = "sent1"
    choice_start_column: str = "sent2"  # "" = the ending alone
    num_choices: int = 4  # endings in columns ending0 … ending{num_choices - 1}
    # optimisation
    epochs: int = 3
    batch_size: int = 32  # global train batch; the last ragged batch of an epoch is skipped
    eval_batch_size: int = 64  # evaluation scores every row (the last batch is padded)
    learning_rate: float = 5e-5  # peak
    warmup_ratio: float = 0.1  # share of all steps in linear warmup, then linear decay to 0
    weight_decay: float = 0.01  # decoupled, on ≥2-D params only
    optimizer: str = "adamw"  # adamw | lamb
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0
    on_nonfinite: str = "stop"  # a NaN/Inf loss or gradient skips its update, then: stop | skip
    seed: int = 0  # seeds the classifier init, dropout and the batch order
    best_metric: str = ""  # validation metric that picks the kept epoch ("" = the task's first
    #   that the data has: mcc; SQuAD F1; entity F1, or word accuracy for tags that are not
    #   chunks (POS); accuracy)
    # bookkeeping
    log_every: int = 10  # steps between train metric logs
    checkpoint_every: int = 100  # steps between checkpoints (and at every epoch end)
    keep_checkpoints: int = 2
    checkpoint_dir: str = ""  # "" = WORKDIR/checkpoints; several processes need one they share

    # old field name → new: refused on the command line with the new name, read as the new
    # one from a saved run's finetune_config.json (training/config_files.migrate)
    RENAMED: typing.ClassVar[dict] = {"init": "init_from"}

    def replace(self, **changes) -> "FinetuneConfig":
        return dataclasses.replace(self, **changes)


config_files.RENAMED_FIELDS[FinetuneConfig.__name__] = FinetuneConfig.RENAMED


# The fields a resumed run may change (training/run_record.py): train more epochs, log,
# evaluate or checkpoint at other intervals, keep checkpoints elsewhere. Every other field changes
# what the run computes, and a resume with another value is refused.
RESUMABLE = ("epochs", "log_every", "checkpoint_every", "keep_checkpoints", "checkpoint_dir",
             "eval_batch_size")


def validate(cfg: FinetuneConfig) -> FinetuneConfig:
    """Refuse impossible values, naming the field."""
    if not cfg.init_from:
        raise BertJaxError("config.init_from: a pretrained model to fine-tune is required "
                           "(give config.init_from)")
    if not cfg.dataset and not cfg.train_file:
        raise BertJaxError("config.train_file: give config.train_file (and "
                           "config.validation_file) or config.dataset")
    if not cfg.dataset and not cfg.validation_file:
        raise BertJaxError("config.validation_file: give config.validation_file: the best epoch "
                           "is chosen on it")
    config_files.check_fields(
        cfg, at_least_one=("max_seq_length", "epochs", "batch_size", "eval_batch_size",
                           "log_every", "checkpoint_every", "keep_checkpoints",
                           "max_answer_length", "n_best", "num_choices"),
        non_negative=("seed", "doc_stride", "reinit_layers", "reinit_attention"),
        choices={"task": tuple(TASKS), "dtype": ("float32", "bfloat16"),
                 "head_init": HEAD_INITS,
                 "optimizer": ("adamw", "lamb"),
                 "on_nonfinite": config_files.NONFINITE_POLICIES},
        fractions=("warmup_ratio",) + (("dropout",) if cfg.dropout is not None else ()),
        positive=("learning_rate", "adam_eps", "max_grad_norm")
        + (("rescale_embeddings",) if cfg.rescale_embeddings != 0 else ()))  # 0: off
    if not 0 < cfg.layer_lr_decay <= 1:  # NaN fails this too
        raise BertJaxError(f"config.layer_lr_decay: expected a value in (0, 1], got "
                           f"{cfg.layer_lr_decay}")
    if cfg.num_choices < 2:
        raise BertJaxError(f"config.num_choices: expected at least 2 endings to choose from, "
                           f"got {cfg.num_choices}")
    metrics = TASKS[cfg.task].metrics
    if cfg.best_metric and cfg.best_metric not in metrics:
        raise BertJaxError(f"config.best_metric: expected one of {', '.join(metrics)} for "
                           f"{cfg.task}, got {cfg.best_metric!r}")
    return cfg


def load_config(path: str, overrides: typing.Sequence[str] = (), **changes) -> FinetuneConfig:
    """`get_config()` of `path` (or the defaults when path is ""), then `FIELD=VALUE` overrides,
    then `changes` (the command-line flags that were given)."""
    cfg = config_files.run_config_file(path) if path else FinetuneConfig()
    if not isinstance(cfg, FinetuneConfig):
        raise BertJaxError(f"{path}: get_config() returns a {type(cfg).__name__}, not a "
                           f"FinetuneConfig")
    cfg = config_files.apply_overrides(cfg, overrides)
    return validate(cfg.replace(**{k: v for k, v in changes.items() if v is not None}))


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """The fields optim.make_optimizer reads, with steps known once the data is."""

    learning_rate: float
    warmup_steps: int
    steps: int
    weight_decay: float
    optimizer: str
    adam_b1: float
    adam_b2: float
    adam_eps: float
    max_grad_norm: float
    decay_share: float = 1.0  # fine-tuning decays over everything after the warm-up


def optimizer_settings(cfg: FinetuneConfig, steps: int) -> OptimizerSettings:
    return OptimizerSettings(cfg.learning_rate, int(round(cfg.warmup_ratio * steps)), steps,
                             cfg.weight_decay, cfg.optimizer, cfg.adam_b1, cfg.adam_b2,
                             cfg.adam_eps, cfg.max_grad_norm)
