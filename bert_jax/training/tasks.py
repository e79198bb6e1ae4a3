"""The fine-tuning tasks: for each, its data, model, loss and validation scores.

The job (training/finetune.py) is one loop for every task; what differs lives in one `Task`
here. A task's `prepare` reads and encodes the splits once, at start, into fixed-shape numpy
columns for the train step and an `EvalSplit` per scored split, which turns the model's
logits over every row back into the scores people report: accuracy / macro-F1 / MCC for
sequences, SQuAD exact match and F1 over whole examples (not windows) for spans, word
accuracy and entity F1 over whole sentences for tags, accuracy for multiple choice.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Optional

import numpy as np

from bert_jax.data import classification, multiple_choice, qa_answers, squad
from bert_jax.data import token_classification as tagging
from bert_jax.errors import BertJaxError
from bert_jax.models.task_models import ARCHITECTURES
from bert_jax.training import entity_scores, steps
from bert_jax.training.finetune_config import TASK_METRICS, FinetuneConfig
from bert_jax.training.scores import classification_scores
from bert_jax.training.squad_scores import squad_scores

log = logging.getLogger("bert_jax")
INPUTS = ("input_ids", "token_type_ids", "attention_mask")


@dataclasses.dataclass(frozen=True)
class EvalSplit:
    """A scored split: the model's inputs, and `score(logits) -> (scores, predictions)` on the
    logits of every row in order (predictions: what predictions.json keeps, or None)."""

    inputs: dict  # INPUTS columns, (N, L) or (N, C, L)
    score: Callable[[object], tuple[dict, Optional[dict]]]


@dataclasses.dataclass(frozen=True)
class Prepared:
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
class Task:
    architecture: str  # the Hugging Face class the export loads in (task_models.ARCHITECTURES)
    loss: Callable  # steps.*_loss: (logits, batch) -> {"loss", "accuracy"} sums
    prepare: Callable[[FinetuneConfig, object], Prepared]
    headline: tuple  # the scores printed and copied to metrics.json's top level
    id2label: Optional[tuple] = None  # a head's fixed outputs (spans: start, end)

    @property
    def model(self) -> type:
        """The Linen module of `architecture`."""
        return ARCHITECTURES[self.architecture][0]

    def configure(self, config, names: tuple):
        """The model config for this task: the class / tag names where the head has them."""
        labels = self.id2label or names
        return config.replace(id2label=labels) if labels else config


def _files(cfg: FinetuneConfig) -> Optional[dict]:
    if cfg.dataset:
        return None
    return {"train": cfg.train_file, "validation": cfg.validation_file, "test": cfg.test_file}


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def _class_scores(logits: np.ndarray, labels: np.ndarray) -> tuple[dict, None]:
    """Accuracy, macro-F1, MCC and loss of (N, C) logits."""
    scores = classification_scores(labels, logits.argmax(-1), logits.shape[-1])
    scores["loss"] = float(-np.take_along_axis(_log_softmax(logits), labels[:, None], 1).mean())
    scores["rows"] = len(labels)
    return scores, None


def _inputs(arrays: dict) -> dict:
    return {k: arrays[k] for k in INPUTS}


def _class_evals(data: dict) -> dict:
    """An EvalSplit scoring (N, C) logits against `labels` for every split but train."""
    return {split: EvalSplit(_inputs(a), lambda logits, labels=a["labels"]:
                             _class_scores(logits, labels))
            for split, a in data.items() if split != "train"}


def _require_train(splits: dict) -> None:
    if "train" not in splits:
        raise BertJaxError("splits: no training data (a train file, or a dataset with a train "
                           "split, is needed)")


# -- sequence classification --------------------------------------------------------------------

def _prepare_sequences(cfg: FinetuneConfig, tok) -> Prepared:
    splits = classification.load_splits(cfg.dataset, cfg.dataset_config, _files(cfg))
    names, data = classification.prepare(splits, tok, cfg.text_column, cfg.text_pair_column,
                                         cfg.label_column, cfg.max_seq_length)
    return Prepared(names, data["train"], _class_evals(data),
                    TASK_METRICS["sequence-classification"])


# -- multiple choice ---------------------------------------------------------------------------

def _prepare_choices(cfg: FinetuneConfig, tok) -> Prepared:
    splits = multiple_choice.load_splits(cfg.dataset, cfg.dataset_config, _files(cfg))
    _require_train(splits)
    data = {}
    for split, (where, table) in splits.items():
        arrays = multiple_choice.encode(
            tok, table, where, cfg.max_seq_length, cfg.choice_context_column,
            cfg.choice_start_column, [f"ending{i}" for i in range(cfg.num_choices)])
        if "labels" not in arrays:  # encode has warned: not scored
            if split == "train":
                raise BertJaxError(f"{where}: has no labels to train on (column 'label')")
            continue
        data[split] = arrays
    return Prepared((), data["train"], _class_evals(data), TASK_METRICS["multiple-choice"])


# -- token classification ----------------------------------------------------------------------

def _prepare_tags(cfg: FinetuneConfig, tok) -> Prepared:
    splits = tagging.load_splits(cfg.dataset, cfg.dataset_config, _files(cfg),
                                 cfg.tokens_column, cfg.tags_column)
    _require_train(splits)
    names = tagging.tag_names(splits["train"][2])
    if len(names) < 2:
        raise BertJaxError(f"{splits['train'][0]}: the tags column has one tag ({names[0]}); "
                           f"token classification needs at least two")
    scheme = entity_scores.chunk_scheme(names)
    if scheme is None:
        log.info("tags %s are not chunk tags (B-/I-/E-/S-): word accuracy only",
                 ", ".join(names[:5]) + (" …" if len(names) > 5 else ""))
    train, evals = None, {}
    for split, (where, sentences, tags) in splits.items():
        feats = tagging.encode(tok, sentences, cfg.max_seq_length, tags, names, where)
        if split == "train":
            train = {k: feats[k] for k in INPUTS + ("labels",)}
            continue
        gold = [[names.index(t) for t in row] for row in tags]
        evals[split] = EvalSplit(_inputs(feats), lambda logits, feats=feats, gold=gold:
                                 (_tag_scores(logits, feats, gold, names, scheme), None))
    # entity scores need chunk tags: POS tags have word accuracy only
    metrics = ("accuracy",) if scheme is None else TASK_METRICS["token-classification"]
    return Prepared(names, train, evals, metrics)


def _tag_scores(logits: np.ndarray, feats: dict, gold: list, names: tuple,
                scheme: Optional[str]) -> dict:
    """Word accuracy over every word of every sentence; entity precision / recall / F1 (strict
    spans) when the tags are chunk tags."""
    predicted = tagging.word_predictions(logits, feats, len(gold), [len(g) for g in gold])
    scores = {"accuracy": entity_scores.token_accuracy(gold, predicted),
              "sentences": len(gold), "words": sum(map(len, gold))}
    if scheme is not None:
        as_names = lambda rows: [[names[i] for i in row] for row in rows]  # noqa: E731
        scores.update(entity_scores.entity_scores(as_names(gold), as_names(predicted), scheme))
    return scores


# -- question answering ------------------------------------------------------------------------

def _prepare_spans(cfg: FinetuneConfig, tok) -> Prepared:
    splits = squad.load_splits(cfg.dataset, cfg.dataset_config, _files(cfg))
    _require_train(splits)
    for split, (where, examples) in splits.items():
        squad.check_examples(examples, where, training=split == "train")
    version_2 = cfg.version_2_with_negative or any(
        not e.answers for _, examples in splits.values() for e in examples)
    if version_2 and not cfg.version_2_with_negative:
        log.info("some questions have no answer: scoring as SQuAD 2.0")
    train, evals = None, {}
    for split, (where, examples) in splits.items():
        feats = squad.features(tok, examples, cfg.max_seq_length, cfg.doc_stride,
                               training=split == "train", where=where)
        if split == "train":
            train = {k: feats[k] for k in INPUTS + ("start_positions", "end_positions")}
            continue

        def score(logits, feats=feats, examples=examples):
            answers = qa_answers.best_answers(logits[0], logits[1], feats, examples, cfg.n_best,
                                              cfg.max_answer_length, version_2,
                                              cfg.null_score_threshold)
            predictions = {a["id"]: a["answer"] for a in answers}
            scores = squad_scores(predictions, examples)
            scores["windows"] = len(feats["input_ids"])
            return scores, predictions
        evals[split] = EvalSplit(_inputs(feats), score)
    return Prepared((), train, evals, TASK_METRICS["question-answering"])


TASKS = {
    "sequence-classification": Task(
        "BertForSequenceClassification", steps.sequence_loss, _prepare_sequences,
        ("accuracy", "macro_f1", "mcc")),
    "question-answering": Task(
        "BertForQuestionAnswering", steps.span_loss, _prepare_spans, ("exact_match", "f1"),
        id2label=("start", "end")),
    "token-classification": Task(
        "BertForTokenClassification", steps.token_loss, _prepare_tags,
        ("accuracy", "precision", "recall", "f1")),
    "multiple-choice": Task(
        "BertForMultipleChoice", steps.sequence_loss, _prepare_choices, ("accuracy",)),
}
assert set(TASKS) == set(TASK_METRICS)
