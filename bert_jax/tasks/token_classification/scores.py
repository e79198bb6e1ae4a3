"""Entity precision / recall / F1 and word accuracy for token classification.

The headline entity scores are conlleval's, the CoNLL-2003 NER scores papers, transformers'
run_ner.py and seqeval's default mode report: a chunk is a run of tags of one type, started by
B-X or S-X, or by an I-X / E-X that follows O, another type or a finished chunk (gold B-PER I-PER
against predicted I-PER I-PER is a hit). The strict scores (`strict_*`, seqeval's mode="strict"
with scheme IOB2 or IOBES) count only spans well formed under the scheme: an I-X after O starts
nothing in IOB2, B-X I-X with no E-X is no entity in IOBES. Both without the dependency; an
entity counts when its type and exact span agree.
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


def chunks(tags: Sequence[str], where: str = "tags") -> set[tuple[str, int, int]]:
    """{(type, start, end)} of one sentence's conlleval chunks, end exclusive (seqeval's
    default get_entities): a chunk ends before O, B-X, S-X, a type change, or after E-X /
    S-X; it starts at B-X / S-X, or at I-X / E-X after O, a finished chunk or another type."""
    found, start, prev, prev_kind = set(), 0, "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        parts = split_tag(tag)
        if parts is None:
            raise BertJaxError(f"{where}: word {i + 1}: tag {tag!r} is not a chunk tag "
                               f"(expected O or B/I/E/S-TYPE)")
        prefix, kind = parts
        if prev != "O" and (prev in "ES" or prefix in "OBS" or kind != prev_kind):
            found.add((prev_kind, start, i))
        if prefix in "BS" or (prefix in "IE" and (prev in "OES" or kind != prev_kind)):
            start = i
        prev, prev_kind = prefix, kind
    return found


def entity_scores(true_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]],
                  scheme: str) -> dict[str, float]:
    """Micro precision, recall and F1 over all entities of all sentences, conlleval's
    (precision, recall, f1) and the scheme's strict ones (strict_precision, …); 0.0 where a
    ratio is undefined (nothing predicted, nothing to find). true_tags[s][w] is word w's tag."""
    if scheme not in SCHEMES:
        raise BertJaxError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    if len(true_tags) != len(pred_tags):
        raise BertJaxError(f"predictions: {len(pred_tags)} sentences for {len(true_tags)} "
                           f"reference sentences")
    counts = np.zeros((2, 3), np.int64)  # (conlleval, strict) × (correct, found, wanted)
    for s, (true, pred) in enumerate(zip(true_tags, pred_tags), 1):
        if len(true) != len(pred):
            raise BertJaxError(f"predictions: sentence {s}: {len(pred)} tags for "
                               f"{len(true)} words")
        for row, read in enumerate((chunks, lambda tags, where: spans(tags, scheme, where))):
            true_set = read(true, f"reference sentence {s}")
            pred_set = read(pred, f"predicted sentence {s}")
            counts[row] += (len(true_set & pred_set), len(pred_set), len(true_set))
    out = {}
    for prefix, (correct, found, wanted) in zip(("", "strict_"), counts.tolist()):
        precision = correct / found if found else 0.0
        recall = correct / wanted if wanted else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out.update({f"{prefix}precision": precision, f"{prefix}recall": recall,
                    f"{prefix}f1": f1})
    return out


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
