"""Question answering examples → the windows Hugging Face's run_qa cuts: (question, context)
pairs truncated "only_second" with `doc_stride` tokens of overlap between consecutive windows,
every overflowing window kept; all at once for training (`features`), a chunk at a time for
evaluation and predict (`Windows`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bert_jax.data.tokenizer import _restore
from bert_jax.errors import BertJaxError
from bert_jax.tasks.question_answering.data import QAExample

# windows per chunk (whole examples, at least one): one encode_batch call, and in evaluation and
# predict one pass of the model; bounds the Encoding objects, features and logits alive at once,
# however many windows a long context makes
_ENCODE_WINDOWS = 1000


def features(tok, examples: Sequence[QAExample], max_seq_length: int, doc_stride: int,
             training: bool, where: str = "features") -> dict[str, np.ndarray]:
    """Examples → windows, exactly as transformers' BertTokenizerFast(question, context,
    truncation="only_second", max_length=max_seq_length, stride=doc_stride,
    return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length") cuts them.

    Returns N windows (N ≥ len(examples)): input_ids, token_type_ids, attention_mask (N, L)
    int32; example_index (N,) int32; offsets (N, L, 2) int32, character (start, end) into the
    context for context tokens and (-1, -1) elsewhere. training=True adds start_positions,
    end_positions (N,) int32: the first answer's first and last token in the window, or 0
    ([CLS]) when the answer is not wholly inside the window or there is none (run_qa's rule).
    `where` (the file or split) names the examples in a refusal.
    """
    parts = list(Windows(tok, examples, max_seq_length, doc_stride, where))
    out = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    if training:
        out["start_positions"], out["end_positions"] = _positions(out, examples)
    return out


class Windows:
    """The windows of `features` (without answer positions), cut a chunk at a time as they are
    iterated: about `_ENCODE_WINDOWS` windows of whole examples per chunk, each a dict of the
    same columns with example_index counted over all examples. Evaluation and `predict` run the
    model chunk by chunk, so a long context asked many questions (a 1M-character one makes
    thousands of windows per question) never has all its windows held at once; contexts are
    never cut. Lengths are checked, and windows counted, when it is made; it can be iterated
    again (each pass encodes anew)."""

    def __init__(self, tok, examples: Sequence[QAExample], max_seq_length: int, doc_stride: int,
                 where: str = "features"):
        if (not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool)
                or max_seq_length < 4):
            raise BertJaxError(f"max_seq_length: expected an integer ≥ 4, got {max_seq_length!r}")
        if not isinstance(doc_stride, int) or isinstance(doc_stride, bool) or doc_stride < 0:
            raise BertJaxError(f"doc_stride: expected an integer ≥ 0, got {doc_stride!r}")
        if not examples:
            raise BertJaxError("features: no examples")
        self.tok, self.examples = tok, examples
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        old_truncation, old_padding = tok.truncation, tok.padding
        try:  # set per call and restored: the Tokenizer object is shared, its settings global
            tok.no_truncation()
            tok.no_padding()
            self.counts = _check_lengths(tok, examples, max_seq_length, doc_stride,
                                         tok.num_special_tokens_to_add(True), where)
        finally:
            _restore(tok, old_truncation, old_padding)

    def __len__(self) -> int:
        """Windows in all."""
        return sum(self.counts)

    def __iter__(self):
        for lo, hi in _chunks(self.counts, _ENCODE_WINDOWS):
            yield self._encode(lo, hi)

    def _encode(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        tok = self.tok
        old_truncation, old_padding = tok.truncation, tok.padding
        try:
            tok.enable_truncation(self.max_seq_length, stride=self.doc_stride,
                                  strategy="only_second", direction="right")
            tok.enable_padding(direction="right", pad_id=tok.token_to_id("[PAD]"),
                               pad_type_id=0, pad_token="[PAD]", length=self.max_seq_length)
            encodings = tok.encode_batch([(ex.question, ex.context)
                                          for ex in self.examples[lo:hi]])
        finally:
            _restore(tok, old_truncation, old_padding)
        # transformers' order: each example's first window, then its overflows
        return _arrays([(lo + i, w) for i, enc in enumerate(encodings)
                        for w in [enc] + enc.overflowing], self.max_seq_length)


def _arrays(windows: list, max_seq_length: int) -> dict[str, np.ndarray]:
    """(example index, Encoding) pairs → numpy columns, so that Encoding objects (tens of KB
    each, token strings included) live only for one chunk."""
    n = len(windows)

    def column(name: str) -> np.ndarray:  # (n, L) int32 from one Encoding attribute
        return np.asarray([getattr(e, name) for _, e in windows], np.int32).reshape(
            n, max_seq_length)

    out = {"input_ids": column("ids"), "token_type_ids": column("type_ids"),
           "attention_mask": column("attention_mask"),
           "example_index": np.asarray([i for i, _ in windows], np.int32)}
    # context tokens: segment 1 and not a template special ([SEP]) or padding
    is_context = (out["token_type_ids"] == 1) & (column("special_tokens_mask") == 0)
    offsets = np.asarray([e.offsets for _, e in windows], np.int32).reshape(n, max_seq_length, 2)
    out["offsets"] = np.where(is_context[..., None], offsets, -1).astype(np.int32)
    return out


def _chunks(windows: list[int], size: int):
    """(lo, hi) runs of examples with about `size` windows each (at least one example)."""
    lo, count = 0, 0
    for i, n in enumerate(windows):
        count += n
        if count >= size:
            yield lo, i + 1
            lo, count = i + 1, 0
    if lo < len(windows):
        yield lo, len(windows)


def _check_lengths(tok, examples, max_seq_length: int, doc_stride: int, special: int,
                   where: str) -> list[int]:
    """Refuse before the Rust tokenizer does: on a stride ≥ the context room it panics (a
    PanicException, which `except Exception` misses), on a question with no room it errors
    without naming the example. Returns each example's number of windows."""
    questions = tok.encode_batch([ex.question for ex in examples], add_special_tokens=False)
    contexts = {}
    for ex in examples:
        contexts.setdefault(ex.context, None)
    unique = list(contexts)
    for c, enc in zip(unique, tok.encode_batch(unique, add_special_tokens=False)):
        contexts[c] = len(enc.ids)
    windows = []
    for ex, q in zip(examples, questions):
        room = max_seq_length - len(q.ids) - special  # context tokens per window
        if room < 1:
            raise BertJaxError(f"{where}: question {ex.id!r} has {len(q.ids)} tokens; "
                               f"max_seq_length {max_seq_length} leaves no room for the context")
        if contexts[ex.context] > room and doc_stride >= room:
            raise BertJaxError(f"doc_stride: {doc_stride} must be less than the {room} context "
                               f"tokens a window of max_seq_length {max_seq_length} leaves beside "
                               f"question {ex.id!r} of {where} ({len(q.ids)} tokens), or "
                               f"windows cannot advance")
        beyond = contexts[ex.context] - room  # tokens past the first window, a stride apart
        windows.append(1 if beyond <= 0 else 1 + -(-beyond // (room - doc_stride)))
    return windows


def _positions(out: dict, examples) -> tuple[np.ndarray, np.ndarray]:
    """Token span of each window's answer: the last context token starting at or before the
    answer's first character, the first one ending at or after its last; 0 when outside."""
    offsets, index = out["offsets"], out["example_index"]
    starts = np.zeros(len(index), np.int32)
    ends = np.zeros(len(index), np.int32)
    for w, i in enumerate(index):
        ex = examples[i]
        if not ex.answers:
            continue
        s_char = ex.answer_starts[0]
        e_char = s_char + len(ex.answers[0])
        ctx = np.flatnonzero(offsets[w, :, 0] >= 0)
        if len(ctx) == 0 or offsets[w, ctx[0], 0] > s_char or offsets[w, ctx[-1], 1] < e_char:
            continue
        starts[w] = ctx[offsets[w, ctx, 0] <= s_char][-1]
        ends[w] = ctx[offsets[w, ctx, 1] >= e_char][0]
    return starts, ends
