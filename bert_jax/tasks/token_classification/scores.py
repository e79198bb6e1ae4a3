"""Entity-level (strict span) precision/recall/F1 and word accuracy for token classification.

The same numbers as seqeval's `mode="strict"` with scheme IOB2 or IOBES (the CoNLL-2003 NER
scores papers report), without the dependency: an entity counts when its type and exact span
agree, and only spans that are well formed under the scheme are entities at all (an I-X after
O starts nothing in IOB2; B-X I-X with no E-X is no entity in IOBES).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.tasks.token_classification.data import split_tag

SCHEMES = ("IOB2", "IOBES")
_PREFIXES = {"IOB2": "OBI", "IOBES": "OBIES"}


def chunk_scheme(names: Sequence[str]) -> Optional[str]:
    """"IOB2" when every tag is O, B-X or I-X; "IOBES" when S-X / E-X occur too (BIOES);
    None for tags that name no spans (POS tags, or nothing but O): score words only."""
    parts = [split_tag(name) for name in names]
    if not parts or any(p is None for p in parts) or all(p[0] == "O" for p in parts):
        return None
    prefixes = {p[0] for p in parts}
    return "IOBES" if prefixes & {"E", "S"} else "IOB2"


def spans(tags: Sequence[str], scheme: str, where: str = "tags") -> set[tuple[str, int, int]]:
    """{(type, start, end)} of one sentence's well-formed entities, end exclusive.

    IOB2: B-X then the I-X that follow it. IOBES: S-X alone, or B-X I-X… E-X. Anything else
    (a stray I-X or E-X, a type change midway, B-X I-X cut off) is no entity, as in seqeval.
    """
    allowed = _PREFIXES[scheme]
    parsed = []
    for i, tag in enumerate(tags):
        parts = split_tag(tag)
        if parts is None or parts[0] not in allowed:
            raise BertJaxError(f"{where}: word {i + 1}: tag {tag!r} is not a {scheme} tag "
                               f"(expected O or {'/'.join(allowed[1:])}-TYPE)")
        parsed.append(parts)
    found, i, n = set(), 0, len(parsed)
    while i < n:
        prefix, kind = parsed[i]
        if prefix == "S" or (prefix == "B" and scheme == "IOBES"):
            end = i + 1
            if prefix == "B":
                while end < n and parsed[end] == ("I", kind):
                    end += 1
                if end < n and parsed[end] == ("E", kind):
                    found.add((kind, i, end + 1))
                    i = end + 1
                    continue
                i = end  # unfinished: the pieces after B-X are skipped, as seqeval skips them
                continue
            found.add((kind, i, end))
        elif prefix == "B":
            end = i + 1
            while end < n and parsed[end] == ("I", kind):
                end += 1
            found.add((kind, i, end))
            i = end
            continue
        i += 1
    return found


def entity_scores(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]],
                  scheme: str) -> dict[str, float]:
    """Micro precision, recall and F1 over all entities of all sentences (0.0 when a ratio
    is undefined: nothing predicted, nothing to find); true_tags[s][w] is word w's tag."""
    if scheme not in SCHEMES:
        raise BertJaxError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    if len(true_tags) != len(pred_tags):
        raise BertJaxError(f"predictions: {len(pred_tags)} sentences for {len(true_tags)} "
                           f"reference sentences")
    correct = found = wanted = 0
    for s, (true, pred) in enumerate(zip(true_tags, pred_tags), 1):
        if len(true) != len(pred):
            raise BertJaxError(f"predictions: sentence {s}: {len(pred)} tags for "
                               f"{len(true)} words")
        true_spans = spans(true, scheme, f"reference sentence {s}")
        pred_spans = spans(pred, scheme, f"predicted sentence {s}")
        correct += len(true_spans & pred_spans)
        found += len(pred_spans)
        wanted += len(true_spans)
    precision = correct / found if found else 0.0
    recall = correct / wanted if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def token_accuracy(true_ids: Sequence[Sequence[int]], pred_ids: Sequence[Sequence[int]]
                   ) -> float:
    """Fraction of words (of all sentences together) whose predicted label is right; 0.0 for
    no words. Takes per-sentence (n_words,) id arrays (or tag strings)."""
    if len(true_ids) != len(pred_ids):
        raise BertJaxError(f"predictions: {len(pred_ids)} sentences for {len(true_ids)} "
                           f"reference sentences")
    right = total = 0
    for s, (true, pred) in enumerate(zip(true_ids, pred_ids), 1):
        if len(true) != len(pred):
            raise BertJaxError(f"predictions: sentence {s}: {len(pred)} labels for "
                               f"{len(true)} words")
        right += int(np.sum(np.asarray(true) == np.asarray(pred))) if len(true) else 0
        total += len(true)
    return right / total if total else 0.0
