"""Pretraining batches from a prepared set: a pure function of (seed, step), read memory-mapped.

The held-out split is by document (data.heldout), made here from the documents' sentence
counts, so no held-out row shares a sentence with training. Epoch e of training draws its
examples from (seed, e) (data/pair_plans.py) and visits them in an order seeded by (seed, e);
step s takes the next batch of that order, and each process builds only its own rows of it.
Resuming therefore needs only the step, and a re-prepared identical set gives identical batches.
"""

from __future__ import annotations

import logging

import numpy as np

from bert_jax.data import batches, pair_plans
from bert_jax.data.heldout import split_heldout
from bert_jax.data.prepared_set import PreparedSet
from bert_jax.errors import BertJaxError

log = logging.getLogger(__name__)

OBJECTIVES = ("mlm+nsp", "mlm+sop", "mlm")
PAIRED = ("mlm+nsp", "mlm+sop")  # objectives of sentence pairs and a [CLS] head
_HELDOUT = "heldout"  # the plan "epoch" of the held-out rows: drawn once, fixed for the run


class PretrainingBatches:
    """Training batches and held-out rows of one objective over one prepared set."""

    def __init__(self, data: PreparedSet, specials: dict[str, int], *, objective: str,
                 max_seq_length: int, short_seq_prob: float = 0.1, eval_fraction: float = 0.0,
                 seed: int = 0):
        if objective not in OBJECTIVES:
            raise BertJaxError(f"objective: expected {' or '.join(OBJECTIVES)}, got "
                               f"{objective!r}")
        _check_params(objective, max_seq_length, short_seq_prob, eval_fraction, seed)
        self.data, self.objective, self.max_seq_length = data, objective, max_seq_length
        self.short_seq_prob, self.seed = short_seq_prob, seed
        self.cls, self.sep, self.pad = specials["[CLS]"], specials["[SEP]"], specials["[PAD]"]
        documents = _check_documents(data, objective)
        self.train_docs, self.heldout_docs, held = split_heldout(documents, eval_fraction, seed)
        self.heldout_summary = held.describe(_Names(data))
        (log.warning if eval_fraction and not held.sentences else log.info)(
            "pretraining data: %s", self.heldout_summary)
        self._plans: dict = {}
        self._epoch_rows: list[int] = []

    # -- plans --------------------------------------------------------------------------------
    def plan(self, epoch):
        """The examples of training epoch `epoch` (or of the held-out side, _HELDOUT)."""
        if epoch not in self._plans:
            heldout = epoch == _HELDOUT
            docs = self.heldout_docs if heldout else self.train_docs
            if self.objective in PAIRED:
                plan = pair_plans.plan_pairs(docs, self.data.sentence_lengths, self.data.starts,
                                             self.max_seq_length, self.short_seq_prob,
                                             self.seed, epoch,
                                             sentence_order=self.objective == "mlm+sop")
            else:
                tokens = np.array([self.data.starts[d.stop] - self.data.starts[d.start]
                                   for d in docs], np.int64)
                plan = pair_plans.plan_packed(tokens, self.max_seq_length, self.seed,
                                              0 if heldout else epoch, shuffle=not heldout)
            if len(self._plans) >= 3:  # the held-out plan and the last two epochs
                del self._plans[next(k for k in self._plans if k != _HELDOUT)]
            self._plans[epoch] = plan
        return self._plans[epoch]

    def epoch_rows(self, epoch: int) -> int:
        """Examples in training epoch `epoch` (pairs: it varies a little from epoch to epoch)."""
        while len(self._epoch_rows) <= epoch:
            self._epoch_rows.append(len(self.plan(len(self._epoch_rows))))
        return self._epoch_rows[epoch]

    def locate(self, step: int, batch_size: int) -> tuple[int, int]:
        """(epoch, step within it) of global step `step`; an epoch's ragged tail is dropped."""
        epoch = 0
        while True:
            steps = self.epoch_rows(epoch) // batch_size
            if steps == 0:
                raise BertJaxError(f"batch_size: {batch_size} is larger than the "
                                   f"{self.epoch_rows(epoch)} training examples of an epoch; "
                                   f"add text or lower batch_size")
            if step < steps:
                return epoch, step
            step -= steps
            epoch += 1

    # -- rows ---------------------------------------------------------------------------------
    def train_batch(self, step: int, batch_size: int, process_index: int = 0,
                    process_count: int = 1) -> dict[str, np.ndarray]:
        """This process's rows of the global batch of `step`: rows [p·B/P, (p+1)·B/P) of it."""
        if not isinstance(step, (int, np.integer)) or step < 0:
            raise BertJaxError(f"step: expected an integer ≥ 0, got {step!r}")
        if not _whole(batch_size, 1) or not _whole(process_count, 1):
            raise BertJaxError(f"batch_size, process_count: expected integers ≥ 1, got "
                               f"{batch_size!r}, {process_count!r}")
        if batch_size % process_count or not 0 <= process_index < process_count:
            raise BertJaxError(f"batch_size: {batch_size} does not split into {process_count} "
                               f"processes (process_index {process_index})")
        epoch, within = self.locate(int(step), batch_size)
        local = batch_size // process_count
        start = within * batch_size + process_index * local
        order = batches.epoch_permutation(self.epoch_rows(epoch), self.seed, epoch)
        return self.rows(self.plan(epoch), order[start:start + local], self.train_docs)

    def heldout(self, max_rows: int = 0) -> dict[str, np.ndarray]:
        """The held-out rows (the first `max_rows` of a fixed seeded order), all in memory."""
        plan = self.plan(_HELDOUT)
        order = np.random.default_rng([self.seed, 1 << 31]).permutation(len(plan))
        return self.rows(plan, order[:max_rows] if max_rows else order, self.heldout_docs)

    def rows(self, plan, indices: np.ndarray, docs: list) -> dict[str, np.ndarray]:
        """Examples `indices` of `plan` (made from `docs`) as padded (n, L) int32 columns, and
        next_sentence_labels (n,) for pairs."""
        n, length = len(indices), self.max_seq_length
        ids = np.full((n, length), self.pad, np.int32)
        types = np.zeros((n, length), np.int32)
        mask = np.zeros((n, length), np.int32)
        tokens = self.data.tokens
        if isinstance(plan, pair_plans.PairPlan):
            for row, i in enumerate(indices):
                a = tokens(int(plan.a_start[i]), int(plan.a_stop[i]))
                b = tokens(int(plan.b_start[i]), int(plan.b_stop[i]))
                end = len(a) + len(b) + 3
                ids[row, 0], ids[row, len(a) + 1], ids[row, end - 1] = self.cls, self.sep, self.sep
                ids[row, 1:len(a) + 1] = a
                ids[row, len(a) + 2:end - 1] = b
                types[row, len(a) + 2:end] = 1
                mask[row, :end] = 1
            labels = plan.label[np.asarray(indices, np.int64)].astype(np.int32)
            return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
                    "next_sentence_labels": labels}
        for row, i in enumerate(indices):
            stream = self._packed_stream(plan, int(i), docs)
            end = len(stream) + 2
            ids[row, 0], ids[row, end - 1] = self.cls, self.sep
            ids[row, 1:end - 1] = stream
            mask[row, :end] = 1
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}

    def _packed_stream(self, plan: pair_plans.PackPlan, row: int, docs: list) -> np.ndarray:
        """Stream tokens of packed row `row`: document pieces, each document's end a [SEP]."""
        starts = plan.stream_starts
        position = row * plan.width
        stop = min(position + plan.width, int(starts[-1]))
        k = int(np.searchsorted(starts, position, side="right")) - 1
        pieces = []
        while position < stop:
            begin, end = int(starts[k]), int(starts[k + 1])  # document k, then its [SEP]
            document = docs[int(plan.order[k])]
            first = int(self.data.starts[document.start])
            take = min(stop, end - 1)
            if position < take:
                pieces.append(self.data.tokens(first + position - begin, first + take - begin))
            if stop >= end:
                pieces.append(np.array([self.sep], np.int32))
            position, k = min(stop, end), k + 1
        return np.concatenate(pieces)


class _Names:
    """Document names on demand (a corpus may hold millions of documents)."""

    def __init__(self, data: PreparedSet):
        self.data = data

    def __getitem__(self, i: int) -> str:
        return self.data.document_name(i)


def _check_documents(data: PreparedSet, objective: str) -> list[range]:
    """Documents as sentence ranges; refuse (or report) what cannot make real pairs."""
    where = data.directory
    if data.num_documents == 0:
        raise BertJaxError(f"{where}: no text to make examples of (no tokens)")
    documents = [range(int(f), int(f + c)) for f, c in zip(data.doc_first, data.doc_count)]
    single = int((data.doc_count == 1).sum())
    if objective in PAIRED:
        if single == len(documents):
            raise BertJaxError(f"{where}: every document is a single sentence, too short to "
                               f"make a real next-sentence pair")
        if single:
            log.warning("%s: %d of %d documents are too short to pair (one sentence): they give "
                        "%s", where, single, len(documents),
                        "no sentence-order pairs" if objective == "mlm+sop"
                        else "only random-next examples")
    log.info("pretraining data: %d document%s, %d sentences, %d tokens (%s)", len(documents),
             "s" * (len(documents) != 1), len(data.sentence_lengths), int(data.starts[-1]),
             data.document_name(0) + (" as one document" if len(documents) == 1 else ", …"))
    return documents


def _whole(value, minimum: int) -> bool:
    return (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and value >= minimum)


def _check_params(objective, max_seq_length, short_seq_prob, eval_fraction, seed) -> None:
    """Refused here, in one line, rather than deep in a plan (a pair needs L - 3 ≥ 2 tokens)."""
    least = 5 if objective in PAIRED else 3
    fraction = isinstance(eval_fraction, (int, float)) and not isinstance(eval_fraction, bool)
    probability = isinstance(short_seq_prob, (int, float)) and not isinstance(short_seq_prob,
                                                                               bool)
    for name, value, ok, expected in (
            ("max_seq_length", max_seq_length, _whole(max_seq_length, least),
             f"an integer ≥ {least}"),
            ("short_seq_prob", short_seq_prob, probability and 0 <= short_seq_prob <= 1,
             "a probability in [0, 1]"),
            ("eval_fraction", eval_fraction, fraction and 0 <= eval_fraction < 1,
             "a fraction in [0, 1)"),
            ("seed", seed, _whole(seed, 0), "an integer ≥ 0")):
        if not ok:
            raise BertJaxError(f"{name}: expected {expected}, got {value!r}")
