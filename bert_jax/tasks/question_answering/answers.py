"""Span logits of every window → one answer text per example (SQuAD v1.1 and v2.0 rules), all
at once (`best_answers`) or a chunk of windows at a time (`BestSpans`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bert_jax.errors import BertJaxError


def best_answers(start_logits: np.ndarray, end_logits: np.ndarray, feats: dict,
                 examples: Sequence, n_best: int = 20, max_answer_length: int = 30,
                 version_2: bool = False, null_threshold: float = 0.0) -> list[dict]:
    """The best span of each example over all its windows, as google-research/bert
    run_squad.py write_predictions and Hugging Face utils_qa.postprocess_qa_predictions.

    Args:
      start_logits, end_logits: (N, L) per window, N = len(feats["example_index"]).
      feats: `windows.features` output (or a chunk of `windows.Windows`); uses offsets
        (N, L, 2) (-1 outside the context) and example_index (N,).
      examples: the QAExamples the features came from (their contexts give the texts).
      n_best: start and end candidates per window (the top n_best of each by logit).
      max_answer_length: longest span in tokens.
      version_2: allow "no answer": predicted when null_score - best span score >
        null_threshold, null_score being the smallest start_logits[w, 0] + end_logits[w, 0]
        over the example's windows (HF's min_null_score; run_squad's score_null).

    Returns one dict per example, in order: id, answer ("" = no answer), score (start + end
    logit of the chosen span, or the null score for ""), start, end (character offsets into
    the context, -1 for ""), null_score. With no valid span at all the answer is "".

    Scores are summed in float64. Ties are broken deterministically, as HF's loop would with
    a stable sort: candidates rank by logit with the earlier position first, the first pair in
    (start rank, end rank) order wins inside a window, and the earliest window wins across
    windows — so equal logits never make the prediction depend on sort internals.
    """
    spans = BestSpans(examples, n_best, max_answer_length)
    spans.add(start_logits, end_logits, feats)
    return spans.answers(version_2, null_threshold)


class BestSpans:
    """`best_answers` fed a chunk of windows at a time: each example keeps only its best span
    so far and its smallest null score, so memory grows with the examples, not the windows (a
    1M-character context makes thousands per question). Chunks must come in window order (the
    earliest window keeps a tie); the answers equal `best_answers` over all windows at once."""

    def __init__(self, examples: Sequence, n_best: int = 20, max_answer_length: int = 30):
        for name, value in (("n_best", n_best), ("max_answer_length", max_answer_length)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise BertJaxError(f"{name}: expected an integer ≥ 1, got {value!r}")
        self.examples, self.n_best, self.max_answer_length = examples, n_best, max_answer_length
        count = len(examples)
        self.best = np.full(count, -np.inf)  # best span score so far (-inf: none yet)
        self.start = np.full(count, -1, np.int64)  # its character offsets
        self.end = np.full(count, -1, np.int64)
        self.null = np.full(count, np.inf)  # smallest null score so far
        self.seen = np.zeros(count, bool)  # has a window
        self.windows = 0  # windows seen

    def add(self, start_logits: np.ndarray, end_logits: np.ndarray, feats: dict) -> None:
        """Fold in the next windows: (N, L) logits and their feats' offsets and example_index."""
        start = np.asarray(start_logits, np.float64)
        end = np.asarray(end_logits, np.float64)
        offsets = np.asarray(feats["offsets"])
        index = np.asarray(feats["example_index"])
        _check(start, end, offsets, index, len(self.examples), self.windows)
        n, length = start.shape
        k = min(self.n_best, length)
        top_s = np.argsort(-start, axis=1, kind="stable")[:, :k]  # (N, k) best first
        top_e = np.argsort(-end, axis=1, kind="stable")[:, :k]
        in_context = offsets[:, :, 0] >= 0  # (N, L)
        ok = (np.take_along_axis(in_context, top_s, 1)[:, :, None]
              & np.take_along_axis(in_context, top_e, 1)[:, None, :])  # (N, k, k)
        span = top_e[:, None, :] - top_s[:, :, None] + 1  # (N, k, k) tokens
        ok &= (span >= 1) & (span <= self.max_answer_length)
        scores = (np.take_along_axis(start, top_s, 1)[:, :, None]
                  + np.take_along_axis(end, top_e, 1)[:, None, :])  # (N, k, k)
        scores = np.where(ok, scores, -np.inf).reshape(n, k * k)
        pick = np.argmax(scores, axis=1)  # first maximum: start-major order
        rows = np.arange(n)
        window_best = scores[rows, pick]  # (N,) -inf when the window has no valid span
        s_char = offsets[rows, top_s[rows, pick // k], 0]
        e_char = offsets[rows, top_e[rows, pick % k], 1]
        window_null = start[:, 0] + end[:, 0]  # (N,)
        # each example's best window here, the earliest of equals; it replaces the best of
        # earlier chunks only when strictly better, so the earliest window keeps a tie
        order = np.lexsort((rows, -window_best, index))
        first = order[np.r_[True, index[order][1:] != index[order][:-1]]] if n else order
        better = first[window_best[first] > self.best[index[first]]]
        ex = index[better]
        self.best[ex], self.start[ex], self.end[ex] = (window_best[better], s_char[better],
                                                       e_char[better])
        np.minimum.at(self.null, index, window_null)
        self.seen[index] = True
        self.windows += n

    def answers(self, version_2: bool = False, null_threshold: float = 0.0) -> list[dict]:
        """One dict per example, as `best_answers` returns them."""
        results = []
        for i, ex in enumerate(self.examples):
            null = float(self.null[i])
            if not self.seen[i]:
                raise BertJaxError(f"feats: example {ex.id!r} (row {i + 1}) has no window")
            best = self.best[i]
            if not np.isfinite(best) or (version_2 and null - best > null_threshold):
                results.append({"id": ex.id, "answer": "", "score": null, "start": -1,
                                "end": -1, "null_score": null})
                continue
            s, e = int(self.start[i]), int(self.end[i])
            results.append({"id": ex.id, "answer": ex.context[s:e], "score": float(best),
                            "start": s, "end": e, "null_score": null})
        return results


def _check(start, end, offsets, index, count, first: int = 0) -> None:
    """Shapes, example indices and NaN of a chunk whose first window is window `first`."""
    if start.ndim != 2 or end.shape != start.shape:
        raise BertJaxError(f"logits: start {start.shape} and end {end.shape} must both be (N, L)")
    if offsets.shape != start.shape + (2,) or index.shape != start.shape[:1]:
        raise BertJaxError(f"feats: offsets {offsets.shape} and example_index {index.shape} do "
                           f"not fit logits {start.shape} (expected (N, L, 2) and (N,))")
    if len(index) and (index.min() < 0 or index.max() >= count):
        raise BertJaxError(f"feats: example_index runs {index.min()}…{index.max()} but there are "
                           f"{count} examples")
    for name, logits in (("start_logits", start), ("end_logits", end)):
        bad = np.flatnonzero(np.isnan(logits).any(axis=1))
        if len(bad):
            raise BertJaxError(f"{name}: NaN in {len(bad)} window(s), first window "
                               f"{first + bad[0]}")
