"""SQuAD exact match and F1, by the rules of the official evaluate-v2.0.py (v1.1 answers alike)."""

from __future__ import annotations

import collections
import re
import string
from typing import Sequence

from bert_jax.errors import BertJaxError

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace — in the
    official order, so "The-Tower" and "tower" compare equal."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _golds(golds: Sequence[str]) -> list[str]:
    """Gold texts that survive normalisation; none (an unanswerable v2 question) → [""], so
    only the empty prediction matches, as the official v2 script scores it."""
    kept = [g for g in golds if normalize_answer(g)]
    return kept or [""]


def _exact(gold: str, prediction: str) -> float:
    return float(normalize_answer(gold) == normalize_answer(prediction))


def _f1(gold: str, prediction: str) -> float:
    gold_tokens = normalize_answer(gold).split()
    pred_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not pred_tokens:  # a no-answer on either side: right iff both are
        return float(gold_tokens == pred_tokens)
    same = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold, else 0.0."""
    return max(_exact(g, prediction) for g in _golds(golds))


def f1(prediction: str, golds: Sequence[str]) -> float:
    """Best bag-of-tokens F1 (after normalisation) over the gold answers."""
    return max(_f1(g, prediction) for g in _golds(golds))


def squad_scores(predictions: dict[str, str], examples: Sequence) -> dict:
    """{"exact_match", "f1", "total"} over `examples` (QAExamples; percent 0–100, as the
    official scripts print); when any example has no answer (v2) also HasAns_* and NoAns_*
    (exact, f1, total) over the answerable and unanswerable ones."""
    if not examples:
        raise BertJaxError("squad_scores: no examples to score")
    exact_by, f1_by = {}, {}
    for i, ex in enumerate(examples):
        if ex.id not in predictions:
            raise BertJaxError(f"predictions: no prediction for question {ex.id!r} (row {i + 1})")
        exact_by[ex.id] = exact_match(predictions[ex.id], ex.answers)
        f1_by[ex.id] = f1(predictions[ex.id], ex.answers)

    def summary(ids: list[str]) -> tuple[float, float, int]:
        return (100.0 * sum(exact_by[q] for q in ids) / len(ids),
                100.0 * sum(f1_by[q] for q in ids) / len(ids), len(ids))

    ids = [ex.id for ex in examples]
    out = dict(zip(("exact_match", "f1", "total"), summary(ids)))
    no_answer = [ex.id for ex in examples if not ex.answers]
    if no_answer:
        has_answer = [ex.id for ex in examples if ex.answers]
        for prefix, group in (("HasAns", has_answer), ("NoAns", no_answer)):
            if group:  # the official script leaves out an empty group
                out.update(zip((f"{prefix}_exact", f"{prefix}_f1", f"{prefix}_total"),
                               summary(group)))
    return out
