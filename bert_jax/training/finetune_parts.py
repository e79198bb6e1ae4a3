"""What one fine-tuning step is made of, built from a config alone: the starting model and its
task head, the task's data, the optimiser and schedule, the jitted train and scoring steps and
the batches.

`finetune()` (training/finetune.py) runs these parts (epochs, validation, checkpoints, logs);
a benchmark or a test that builds them steps exactly what the job steps. `build` writes
nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from bert_jax.model_files import model_dir, paths
from bert_jax.data import batches, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig
from bert_jax.runtime import rng, sharding
from bert_jax.tasks import TASKS
from bert_jax.training import initial_params, optim, run, steps
from bert_jax.training.finetune_config import FinetuneConfig, optimizer_settings


@dataclasses.dataclass
class FinetuneParts:
    """One fine-tuning run's pieces; `build` makes them."""

    cfg: FinetuneConfig
    task: object  # the bert_jax.tasks Task
    task_data: object  # its TaskData: train rows, labelled eval splits, label names
    tok: object  # the starting model's tokenizer
    config: BertConfig  # the starting model's, with the task's labels (and cfg.dropout)
    model: object  # the task's model (encoder + fresh head)
    settings: object  # the optimiser settings (finetune_config.optimizer_settings)
    schedule: optax.Schedule
    tx: optax.GradientTransformation
    per_epoch: int  # steps an epoch
    total: int  # steps of the run
    train_step: Callable  # jitted (state, batch, key) → (state, metrics)
    logits_step: Callable  # jitted (state, batch) → the task's logits
    pretrained: Optional[dict]  # the starting weights (reinit_* applied); the runner drops
    #   them (take_pretrained) once they are in the train state
    row_lengths: Optional[object] = None  # each train row's real length (trim_padding only)

    @property
    def best_metric(self) -> str:
        return self.task_data.best_metric(self.cfg.best_metric)

    @property
    def input_shape(self) -> tuple:
        """The shape the model is initialised on: one train row (multiple choice: (1, C, L))."""
        return (1,) + self.task_data.train["input_ids"].shape[1:]

    def take_pretrained(self) -> Optional[dict]:
        """The starting weights, released here (they are large and read once)."""
        params, self.pretrained = self.pretrained, None
        return params

    def start(self, params: dict) -> dict:
        """A fresh init as the run starts it: the task head at cfg.head_init."""
        return initial_params.with_head_init(params, self.task.head, self.cfg.head_init,
                                             self.config.initializer_range,
                                             rng.head_key(self.cfg.seed))

    def train_batch(self, step: int, process_index: int = 0, process_count: int = 1) -> dict:
        """This process's rows of step `step`'s batch (host numpy), cut to its longest row
        with trim_padding."""
        cfg, train = self.cfg, self.task_data.train
        batch = batches.batch_for_step(train, step, cfg.batch_size, cfg.seed,
                                       process_index=process_index, process_count=process_count)
        if self.row_lengths is None:
            return batch
        return batches.cut_to(batch, batches.trimmed_length(
            self.row_lengths, step, cfg.batch_size, cfg.seed, cfg.max_seq_length))


def build(cfg: FinetuneConfig, mesh=None) -> FinetuneParts:
    """The parts of a run of `cfg` (validated): the model at cfg.init_from read once, the task's
    data tokenised, the steps jitted on `mesh` (default every device)."""
    config, pretrained = model_dir.load_pretrained(cfg.init_from)  # read once, used twice
    vocab_dir = paths.vocab_dir(cfg.init_from)
    tok = tokenizer.load(vocab_dir)
    tokenizer.check_fits(tok, config.vocab_size, tokenizer.vocab_path(vocab_dir))
    if cfg.max_seq_length > config.max_position_embeddings:
        raise BertJaxError(f"config.max_seq_length: {cfg.max_seq_length} exceeds the model's "
                           f"max_position_embeddings ({config.max_position_embeddings})")
    task = TASKS[cfg.task]
    task_data = task.load(cfg, tok)
    if "validation" not in task_data.evals:
        raise BertJaxError(f"dataset {cfg.dataset}: has no labelled validation split")
    task_data.best_metric(cfg.best_metric)  # a metric the task does not have is refused now
    config = task.configure(config, task_data.names)
    if cfg.dropout is not None:
        config = config.replace(hidden_dropout_prob=cfg.dropout,
                                attention_probs_dropout_prob=cfg.dropout)
    mesh = mesh or sharding.make_mesh()
    train = task_data.train
    per_epoch = batches.steps_per_epoch(train, cfg.batch_size)
    total = per_epoch * cfg.epochs
    settings = optimizer_settings(cfg, total)
    schedule = optim.learning_rate_schedule(settings.learning_rate, settings.warmup_steps, total)
    model = task.model(config, jnp.dtype(cfg.dtype), remat=cfg.remat)
    if cfg.reinit_layers or cfg.reinit_attention:  # the very values init_state draws
        ids = jnp.zeros((1,) + train["input_ids"].shape[1:], jnp.int32)
        fresh = jax.device_get(jax.jit(lambda key: model.init(key, ids)["params"]["bert"])(
            rng.init_key(cfg.seed)))
        pretrained = initial_params.reinit_top(pretrained, fresh, cfg.reinit_layers, cfg.init_from)
        pretrained = initial_params.reinit_query_key(pretrained, fresh, cfg.reinit_attention,
                                                     cfg.init_from)
    if cfg.rescale_embeddings:
        pretrained = initial_params.rescale_embeddings(pretrained, cfg.rescale_embeddings)
    return FinetuneParts(
        cfg, task, task_data, tok, config, model, settings, schedule,
        optim.make_optimizer(settings, schedule, layer_decay=cfg.layer_lr_decay,
                             num_layers=config.num_hidden_layers), per_epoch, total,
        run.jit_train_step(mesh, steps.make_finetune_step(schedule, task.loss), cfg.remat,
                           cfg.dtype),
        run.jit_eval(mesh, steps.task_logits), pretrained,
        batches.row_lengths(train) if cfg.trim_padding else None)
