"""Span logits of every window → one answer text per example (SQuAD v1.1 and v2.0 rules)."""

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
      feats: `squad.features` output; uses offsets (N, L, 2) (-1 outside the context) and
        example_index (N,).
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
    start = np.asarray(start_logits, np.float64)
    end = np.asarray(end_logits, np.float64)
    offsets = np.asarray(feats["offsets"])
    index = np.asarray(feats["example_index"])
    _check(start, end, offsets, index, len(examples), n_best, max_answer_length)
    n, length = start.shape
    k = min(n_best, length)
    top_s = np.argsort(-start, axis=1, kind="stable")[:, :k]  # (N, k) best first
    top_e = np.argsort(-end, axis=1, kind="stable")[:, :k]
    in_context = offsets[:, :, 0] >= 0  # (N, L)
    ok = (np.take_along_axis(in_context, top_s, 1)[:, :, None]
          & np.take_along_axis(in_context, top_e, 1)[:, None, :])  # (N, k, k)
    span = top_e[:, None, :] - top_s[:, :, None] + 1  # (N, k, k) tokens
    ok &= (span >= 1) & (span <= max_answer_length)
    scores = (np.take_along_axis(start, top_s, 1)[:, :, None]
              + np.take_along_axis(end, top_e, 1)[:, None, :])  # (N, k, k)
    scores = np.where(ok, scores, -np.inf).reshape(n, k * k)
    pick = np.argmax(scores, axis=1)  # first maximum: start-major order
    rows = np.arange(n)
    window_best = scores[rows, pick]  # (N,) -inf when the window has no valid span
    window_start = top_s[rows, pick // k]
    window_end = top_e[rows, pick % k]
    window_null = start[:, 0] + end[:, 0]  # (N,)

    results = []
    windows_of = [[] for _ in examples]
    for w, i in enumerate(index):
        windows_of[i].append(w)
    for i, ex in enumerate(examples):
        ws = windows_of[i]
        if not ws:
            raise BertJaxError(f"feats: example {ex.id!r} (row {i + 1}) has no window")
        null = float(min(window_null[w] for w in ws))
        best = None
        for w in ws:  # strict >: the earliest window keeps a tie
            if np.isfinite(window_best[w]) and (best is None or window_best[w] > window_best[best]):
                best = w
        no_answer = {"id": ex.id, "answer": "", "score": null, "start": -1, "end": -1,
                     "null_score": null}
        if best is None or (version_2 and null - window_best[best] > null_threshold):
            results.append(no_answer)
            continue
        s = int(offsets[best, window_start[best], 0])
        e = int(offsets[best, window_end[best], 1])
        results.append({"id": ex.id, "answer": ex.context[s:e], "score": float(window_best[best]),
                        "start": s, "end": e, "null_score": null})
    return results


def _check(start, end, offsets, index, count, n_best, max_answer_length) -> None:
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
            raise BertJaxError(f"{name}: NaN in {len(bad)} window(s), first window {bad[0]}")
    for name, value in (("n_best", n_best), ("max_answer_length", max_answer_length)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise BertJaxError(f"{name}: expected an integer ≥ 1, got {value!r}")
