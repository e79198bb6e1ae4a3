"""The held-out split of a pretraining corpus: by document, before any pair is made.

A held-out pair must not share a document (nor, with several passes over the corpus, a
sentence) with training, or held-out scores flatter the model.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Optional, Sequence, TypeVar

from bert_jax.errors import BertJaxError

Sentence = TypeVar("Sentence")


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """What split_heldout held out: whole documents, then maybe the tail of one more."""
    whole: tuple[int, ...]  # indices of the documents held out whole, in the seeded order
    tail_document: Optional[int]  # the document whose last `tail` sentences are held out
    tail: int
    sentences: int  # held out in all
    total: int  # in the corpus

    def stats(self, labels: Sequence[str]) -> dict:
        """For the build statistics; labels[i] names document i."""
        return dict(summary=self.describe(labels), sentences=self.sentences,
                    whole_documents=len(self.whole), tail_sentences=self.tail,
                    tail_document=None if self.tail_document is None
                    else labels[self.tail_document])

    def describe(self, labels: Sequence[str]) -> str:
        """One line for the log and the build statistics; labels[i] names document i."""
        parts = []
        if self.whole:
            parts.append(f"{len(self.whole):,} whole document{'s' * (len(self.whole) != 1)}")
        if self.tail:
            parts.append(f"the last {self.tail:,} sentence{'s' * (self.tail != 1)} of "
                         f"{labels[self.tail_document]}")
        share = 100 * self.sentences / max(1, self.total)
        return (f"held out {' and '.join(parts) or 'nothing'}: {self.sentences:,} of "
                f"{self.total:,} sentences ({share:.1f}%)")


def split_heldout(documents: Sequence[Sequence[Sentence]], fraction: float, seed: int
                  ) -> tuple[list[Sequence[Sentence]], list[Sequence[Sentence]], HeldOut]:
    """Documents → (training documents, held-out documents, what was held out).

    By document, not by example: a held-out pair must not share a document (nor, with several
    passes over the corpus, a sentence) with training, or held-out scores flatter the model.
    Documents, in an order seeded by `seed`, are held out whole while they fit in
    round(fraction × all sentences); the rest of that target is the last sentences of the next
    document, whose head stays in training, so that a few book-sized documents (or a single
    one) still give a held-out part of the asked size.
    """
    total = sum(map(len, documents))
    target = round(fraction * total)
    if target >= total and total:
        raise BertJaxError(f"eval_fraction: {fraction} of {total} sentences leaves none for "
                           f"training")
    order = list(range(len(documents)))
    random.Random(f"heldout-{seed}").shuffle(order)
    whole, left, tail_document = [], target, None
    for index in order:
        if len(documents[index]) > left:
            tail_document = index if left else None
            break
        whole.append(index)
        left -= len(documents[index])
    held = set(whole)
    train, heldout = [], [documents[i] for i in whole]
    for index, document in enumerate(documents):
        if index == tail_document:  # its head trains, its tail is held out
            train.append(document[:len(document) - left])
            heldout.append(document[len(document) - left:])
        elif index not in held:
            train.append(document)
    return train, heldout, HeldOut(tuple(whole), tail_document, left, target, total)
