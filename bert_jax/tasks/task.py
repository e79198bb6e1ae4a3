"""What every fine-tuning task provides, in one `Task`: the job (training/finetune.py), `predict`
and the CLI read these fields and know no task by name.

A task's `load` reads and encodes the splits once, at start, into fixed-shape numpy columns for
the train step and an `EvalSplit` per scored split, which turns the model's logits over every
row back into the scores people report. Task modules import JAX and `datasets` only inside the
functions that use them: the table of tasks is read by every `bert-jax` command's parser.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from bert_jax.errors import BertJaxError

INPUTS = ("input_ids", "token_type_ids", "attention_mask")


@dataclasses.dataclass(frozen=True)
class EvalSplit:
    """A scored split: the model's inputs, and `score(logits) -> (scores, predictions)` on the
    logits of every row in order (predictions: what the task's predictions file keeps, or
    None).

    A split too large to hold at once (question answering's windows) gives inputs None and
    `stream(logits_of) -> (scores, predictions)` instead, which feeds its rows a chunk at a
    time to `logits_of(inputs) -> logits` and reduces as it goes; `rows` counts them."""

    inputs: Optional[dict]  # INPUTS columns, (N, L) or (N, C, L)
    score: Optional[Callable[[object], tuple[dict, Optional[dict]]]] = None
    stream: Optional[Callable[[Callable], tuple[dict, Optional[dict]]]] = None
    rows: int = 0  # of a streamed split

    @property
    def size(self) -> int:
        """Rows the model runs on."""
        return self.rows if self.inputs is None else len(self.inputs["input_ids"])


@dataclasses.dataclass(frozen=True)
class TaskData:
    """A task's encoded splits, as `Task.load` returns them."""

    names: tuple  # class / tag names (labels.json, config.id2label); () where there are none
    train: dict  # INPUTS and the targets the task's loss reads
    evals: dict  # {split: EvalSplit}, "validation" always, "test" when given
    metrics: tuple  # the scores that can pick the best epoch with this data, default first

    def best_metric(self, requested: str) -> str:
        """`requested` (config.best_metric), or the default when it is ""; one this data
        cannot score is refused."""
        if not requested:
            return self.metrics[0]
        if requested not in self.metrics:
            raise BertJaxError(f"config.best_metric: {requested} is not scored on this data "
                               f"(it has {', '.join(self.metrics)})")
        return requested


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    """What `bert-jax predict` was asked (its flags); a task reads the fields it has."""

    model: str  # where the model was read from, for messages
    input: str
    output: str
    max_seq_length: Optional[int] = None  # None: the task's default_length
    batch_size: int = 32
    text_column: str = "text"
    text_pair_column: str = ""
    tokens_column: str = "tokens"
    doc_stride: int = 128
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_threshold: float = 0.0


@dataclasses.dataclass(frozen=True)
class Predictor:
    """What `predict` reads and writes for a task: `run(request, config, params, tok, warn)`
    writes request.output and returns the line that says what it wrote; `warn` takes the
    library's warnings (naming parameters) for the command to print as flags."""

    run: Callable[..., str]
    output_types: tuple  # the output file extensions it writes
    about: str  # for `bert-jax predict --help`: what it reads and writes


@dataclasses.dataclass(frozen=True)
class Task:
    name: str  # the table's key: config.task, --task
    architecture: str  # the Hugging Face class the export loads in (task_models.ARCHITECTURES)
    loss: Callable  # (model outputs, batch) -> {"loss", "accuracy"} as (sum, count), jittable
    load: Callable[[object, object], TaskData]  # (FinetuneConfig, tokenizer) -> TaskData
    metrics: tuple  # validation scores that can pick the kept epoch; the first is the default
    headline: tuple  # the scores printed and copied to metrics.json's top level
    summary: Callable[[dict], str]  # one line of the scores people report, from a split's scores
    about: str  # for `bert-jax finetune --help`: the data it reads
    id2label: Optional[tuple] = None  # a head's fixed outputs (spans: start, end)
    predictions_file: str = ""  # the best epoch's validation predictions, kept in the workdir
    predict: Optional[Predictor] = None  # None: `bert-jax predict` does not offer this task
    problem_type: Optional[str] = None  # config.problem_type of its models ("regression")

    @property
    def model(self) -> type:
        """The Linen module of `architecture`."""
        from bert_jax.models.task_models import ARCHITECTURES
        return ARCHITECTURES[self.architecture][0]

    @property
    def head(self) -> str:
        """The parameter group of its head, beside params["bert"] ("classifier", "qa_outputs")."""
        from bert_jax.models.task_models import ARCHITECTURES
        (group,) = ARCHITECTURES[self.architecture][1]
        return group

    def configure(self, config, names: tuple):
        """The model config for this task: the class / tag names where the head has them, and
        its problem_type (an init fine-tuned for another task does not pass its own on)."""
        labels = self.id2label or names
        config = config.replace(problem_type=self.problem_type)
        return config.replace(id2label=labels) if labels else config


def split_files(cfg) -> Optional[dict]:
    """{split: path} of a config's local files; None when it names a hub dataset."""
    if cfg.dataset:
        return None
    return {"train": cfg.train_file, "validation": cfg.validation_file, "test": cfg.test_file}


def require_train(splits: dict) -> None:
    if "train" not in splits:
        raise BertJaxError("splits: no training data (a train file, or a dataset with a train "
                           "split, is needed)")


def inputs_of(arrays: dict) -> dict:
    return {k: arrays[k] for k in INPUTS}
