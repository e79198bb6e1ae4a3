"""Span question answering (SQuAD v1.1 / v2.0), in one place: `data` reads examples,
`windows` cuts them into windows (a chunk at a time for evaluation and predict), `answers`
turns span logits back into answers, `scores` is the official exact match /
F1 over whole examples (not windows); here are the loss, the Task and `predict`'s answers.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Optional, Sequence

from bert_jax.model_files import atomic, paths
from bert_jax.tasks import table_files
from bert_jax.tasks.question_answering import answers, data, windows as qa_windows
from bert_jax.tasks.question_answering.scores import squad_scores
from bert_jax.tasks.task import (INPUTS, EvalSplit, Predictor, PredictRequest, Task, TaskData,
                                 inputs_of, require_train, split_files)

log = logging.getLogger("bert_jax")


def load(cfg, tok) -> TaskData:
    splits = data.load_splits(cfg.dataset, cfg.dataset_config, split_files(cfg))
    require_train(splits)
    for split, (where, examples) in splits.items():
        data.check_examples(examples, where, training=split == "train")
    version_2 = cfg.version_2_with_negative or any(
        not e.answers for _, examples in splits.values() for e in examples)
    if version_2 and not cfg.version_2_with_negative:
        log.info("some questions have no answer: scoring as SQuAD 2.0")
    train, evals = None, {}
    for split, (where, examples) in splits.items():
        if split == "train":
            feats = qa_windows.features(tok, examples, cfg.max_seq_length, cfg.doc_stride,
                                        training=True, where=where)
            train = {k: feats[k] for k in INPUTS + ("start_positions", "end_positions")}
            continue
        windows = qa_windows.Windows(tok, examples, cfg.max_seq_length, cfg.doc_stride, where)

        def score(logits_of, windows=windows):
            found = best_spans(logits_of, windows, cfg.n_best, cfg.max_answer_length).answers(
                version_2, cfg.null_score_threshold)
            predictions = {a["id"]: a["answer"] for a in found}
            scores = squad_scores(predictions, windows.examples)
            scores["windows"] = len(windows)
            return scores, predictions
        evals[split] = EvalSplit(None, stream=score, rows=len(windows))
    return TaskData((), train, evals, TASK.metrics)


def best_spans(logits_of, windows: qa_windows.Windows, n_best: int,
               max_answer_length: int) -> answers.BestSpans:
    """Every window's span logits, `logits_of(inputs) -> (start, end)` on a chunk of windows at
    a time, reduced as they come: only each question's best span is kept."""
    spans = answers.BestSpans(windows.examples, n_best, max_answer_length)
    for feats in windows:
        start, end = logits_of(inputs_of(feats))
        spans.add(start, end, feats)
    return spans


def loss(logits, batch: dict) -> dict:
    """BERT's run_squad loss: the mean of the start and end cross-entropies of the (start, end)
    logits (B, L) against start_positions / end_positions (B,) (0, the [CLS] token, for no
    answer in the window); accuracy counts rows whose start and end are both right."""
    import jax.numpy as jnp
    import optax
    start_logits, end_logits = logits
    start, end = batch["start_positions"], batch["end_positions"]
    ce = (optax.softmax_cross_entropy_with_integer_labels(start_logits, start)
          + optax.softmax_cross_entropy_with_integer_labels(end_logits, end)) / 2
    correct = ((jnp.argmax(start_logits, -1) == start)
               & (jnp.argmax(end_logits, -1) == end)).astype(jnp.float32)
    n = jnp.float32(start.shape[0])
    return {"loss": (ce.sum(), n), "accuracy": (correct.sum(), n)}


def summary(r: dict) -> str:
    line = f"{r['total']} questions: exact match {r['exact_match']:.2f}, F1 {r['f1']:.2f}"
    if "HasAns_f1" in r:
        line += f" (has answer F1 {r['HasAns_f1']:.2f}, no answer {r['NoAns_f1']:.2f})"
    return line


# -- predict -----------------------------------------------------------------------------------

def answer_questions(config, params, tok, questions: Sequence[str], contexts: Sequence[str],
                     ids: Optional[Sequence[str]] = None, max_seq_length: int = 384,
                     doc_stride: int = 128, batch_size: int = 32, max_answer_length: int = 30,
                     n_best: int = 20, version_2: bool = False,
                     null_threshold: float = 0.0) -> list[dict]:
    """The best span of each context for its question, as fine-tuning scores them: every
    window of the context (windows.Windows, a chunk at a time), the n-best start ≤ end pairs of
    each (answers.BestSpans). One dict per question: id, answer, score (start + end logit),
    start, end (character offsets into the context; "" and -1, -1 for no answer, SQuAD 2.0
    only)."""
    import jax

    from bert_jax import inference
    inference.require_head(params, TASK.head)
    inference.check_sizes(config, max_seq_length, batch_size, pairs=True)
    ids = [str(i) for i in range(len(questions))] if ids is None else [str(i) for i in ids]
    examples = [data.QAExample(i, q, c, (), ()) for i, q, c in zip(ids, questions, contexts)]
    data.check_examples(examples, "input", training=False)
    windows = qa_windows.Windows(tok, examples, max_seq_length, doc_stride, where="input")
    apply = functools.partial(inference.jitted(_span_logits), config, jax.device_put(params))
    spans = best_spans(lambda inputs: inference.run_batched(apply, inputs, batch_size),
                       windows, n_best, max_answer_length)
    return spans.answers(version_2, null_threshold)


# attention scores (heads × L × L float32 a window) of the windows the model runs on at once in
# `predict`: a batch whose scores pass this runs as `_rows_at_once` rows at a time (see there)
_SCORES_BYTES = 8 << 20


def _span_logits(config, params, batch):
    """(start (B, L), end (B, L)) logits of a BertForQuestionAnswering, a few rows at a time
    where the batch's attention scores would not stay in cache (`_rows_at_once`)."""
    import jax

    from bert_jax.models import BertForQuestionAnswering

    def logits(rows):
        return BertForQuestionAnswering(config).apply(
            {"params": params}, rows["input_ids"], rows["token_type_ids"],
            rows["attention_mask"])

    count, length = batch["input_ids"].shape
    group = _rows_at_once(config, count, length)
    if group == count:
        return logits(batch)
    groups = jax.tree.map(lambda x: x.reshape(count // group, group, *x.shape[1:]), batch)
    start, end = jax.lax.map(logits, groups)
    return start.reshape(count, length), end.reshape(count, length)


def _rows_at_once(config, rows: int, length: int) -> int:
    """Rows of a (rows, length) batch to run the model on at once: all, unless their attention
    scores pass _SCORES_BYTES; then the largest divisor of `rows` (at least 2) whose scores fit.
    Long windows of a narrow model are memory-bound on scores that leave the cache; a few rows
    at a time they stay, and each row's logits are the same bits (tested; figures:
    bench/RESULTS.md). Never one row at a time: at width 256 a single row gave other bits."""
    per_row = config.num_attention_heads * length * length * 4
    fits = [g for g in range(2, rows) if rows % g == 0 and g * per_row <= _SCORES_BYTES]
    return max(fits) if rows * per_row > _SCORES_BYTES and fits else rows


def _predict(request: PredictRequest, config, params, tok, warn) -> str:
    """A jsonl line per question (input rows with question, context and optionally id, or the
    official SQuAD JSON layout): answer, score, start, end."""
    from bert_jax import inference
    atomic.check_output_file(request.output, (".jsonl",), request.input)
    inference.require_head(params, TASK.head, request.model)
    examples = data.read_squad_questions(request.input)
    if examples is not None:  # a paragraph's questions share its one context string
        questions = [e.question for e in examples]
        contexts = [e.context for e in examples]
        ids = [e.id for e in examples]
    else:
        table = table_files.read_table(request.input)
        table_files.check_columns(table, request.input, ["question", "context"])
        questions = table_files.texts_of(table, "question", request.input)
        contexts = table_files.texts_of(table, "context", request.input)
        ids = (table_files.texts_of(table, "id", request.input) if "id" in table.column_names
               else None)
    length, warnings = inference.clamp_length(config, request.max_seq_length or 384)
    warn(warnings)
    found = answer_questions(
        config, params, tok, questions, contexts, ids, length, request.doc_stride,
        request.batch_size, request.max_answer_length,
        version_2=request.version_2_with_negative, null_threshold=request.null_score_threshold)
    with atomic.atomic_file(request.output) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for a in found:
            row = {"id": a["id"]} if ids is not None else {}
            row.update(answer=a["answer"], score=a["score"], start=a["start"], end=a["end"])
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    empty = sum(not a["answer"] for a in found)
    return (f"wrote {len(found)} answers to {request.output}"
            + (f" ({empty} without an answer)" if empty else ""))


TASK = Task(
    name="question-answering", architecture="BertForQuestionAnswering", loss=loss, load=load,
    metrics=("f1", "exact_match"), headline=("exact_match", "f1"), summary=summary,
    about="SQuAD json or id/question/context/answers records", id2label=("start", "end"),
    predictions_file=paths.PREDICTIONS,
    predict=Predictor(_predict, (".jsonl",),
                      "input rows with question and context (and optionally id), or SQuAD "
                      "JSON; a jsonl line each with answer, score (start + end logit), start, "
                      "end (character offsets into the context)"))
