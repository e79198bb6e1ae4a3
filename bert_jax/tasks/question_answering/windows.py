"""Question answering examples → the windows Hugging Face's run_qa cuts: (question, context)
pairs truncated "only_second" with `doc_stride` tokens of overlap between consecutive windows,
every overflowing window kept; all at once for training (`features`), a chunk at a time for
evaluation and predict (`Windows`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from bert_jax.data.tokenizer import _restore
from bert_jax.errors import BertJaxError
from bert_jax.tasks.question_answering.context_tokens import (ContextTokens, Template, Tokens,
                                                              plain)
from bert_jax.tasks.question_answering.data import QAExample

# windows per chunk: in evaluation and predict one pass of the model; bounds the features and
# logits alive at once, however many windows a long context makes
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
    iterated: `_ENCODE_WINDOWS` windows per chunk (a question's windows may span chunks), each
    a dict of the same columns with example_index counted over all examples. Evaluation and
    `predict` run the model chunk by chunk, so a long context asked many questions (a
    1M-character one makes thousands of windows per question) never has all its windows held
    at once; contexts are never cut. Lengths are checked, and windows counted, when it is made;
    it can be iterated again.

    Each distinct context is tokenized once (SQuAD asks several questions of a paragraph; a
    1M-character context took ~2 s to tokenize, again for each question) and each window is
    put together from the question's tokens and a slice of the context's, laid out as the
    tokenizer's post-processor lays out a pair (its template, read off a probe pair). That
    is what the tokenizer's own truncation does, so the windows are the tokenizer's (tested
    against it); a tokenizer whose pair layout is not [specials] question [specials] context
    [specials] is encoded pair by pair as before (`_pairs`)."""

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
        self._contexts = ContextTokens(tok)
        with plain(tok):
            self.template = Template.of(tok)
            self.counts = _check_lengths(tok, examples, max_seq_length, doc_stride,
                                         tok.num_special_tokens_to_add(True), where,
                                         self._contexts)

    def __len__(self) -> int:
        """Windows in all."""
        return sum(self.counts)

    def __iter__(self):
        if self.template is None:
            for lo, hi in _chunks(self.counts, _ENCODE_WINDOWS):
                yield _pairs(self.tok, self.examples, lo, hi, self.max_seq_length,
                             self.doc_stride)
            return
        for segments in _window_chunks(self.counts, _ENCODE_WINDOWS):
            with plain(self.tok):
                chunk = self._assemble(segments)
            yield chunk

    def _assemble(self, segments: list[tuple[int, int, int]]) -> dict[str, np.ndarray]:
        """The windows w0…w1-1 of example i for each (i, w0, w1), from the question's tokens
        and the cached tokens of its context."""
        examples, length, t = self.examples, self.max_seq_length, self.template
        contexts = self._contexts.of([examples[i].context for i, _, _ in segments])
        questions = self.tok.encode_batch([examples[i].question for i, _, _ in segments],
                                          add_special_tokens=False)
        n = sum(w1 - w0 for _, w0, w1 in segments)
        ids = np.full((n, length), t.pad_id, np.int32)
        types = np.full((n, length), t.pad_type, np.int32)
        special = np.ones((n, length), np.int32)
        offsets = np.zeros((n, length, 2), np.int32)
        attention = np.zeros((n, length), np.int32)
        index = np.empty(n, np.int32)
        row = 0
        for (i, w0, w1), question in zip(segments, questions):
            context, q = contexts[examples[i].context], Tokens.of(question)
            rows = slice(row, row + w1 - w0)
            # the pieces before the context: specials, the question, specials (one for all rows)
            head = [t.prefix, q, t.middle]
            h = sum(len(p.ids) for p in head)
            ids[rows, :h] = np.concatenate([p.ids for p in head])
            types[rows, :h] = np.concatenate([t.prefix.types, np.full(len(q.ids), t.a_type),
                                              t.middle.types])
            special[rows, :h] = np.concatenate([p.special for p in head])
            offsets[rows, :h] = np.concatenate([p.offsets for p in head])
            # context tokens start, start + step, …; the tokenizer's Encoding.truncate(room,
            # stride) cuts at the same places
            room = length - len(q.ids) - t.added
            step = room - self.doc_stride
            total = len(context.ids)
            starts = np.arange(w0, w1) * step
            stops = np.minimum(starts + room, total)
            take = starts[:, None] + np.arange(min(room, total))[None, :]  # (w, room)
            inside = take < stops[:, None]
            take = np.minimum(take, total - 1)
            width = take.shape[1]
            part = (rows, slice(h, h + width))
            ids[part] = np.where(inside, context.ids[take], t.pad_id)
            types[part] = np.where(inside, t.b_type, t.pad_type)
            special[part] = np.where(inside, context.special[take], 1)
            offsets[part] = np.where(inside[..., None], context.offsets[take], 0)
            # specials after each window's context, then padding
            ends = h + stops - starts  # (w,) first position after the context
            r = np.arange(row, row + w1 - w0)
            for k in range(len(t.suffix.ids)):
                ids[r, ends + k] = t.suffix.ids[k]
                types[r, ends + k] = t.suffix.types[k]
                special[r, ends + k] = t.suffix.special[k]
                offsets[r, ends + k] = t.suffix.offsets[k]
            attention[rows] = np.arange(length)[None, :] < (ends + len(t.suffix.ids))[:, None]
            index[rows] = i
            row += w1 - w0
        return _columns(ids, types, attention, special, offsets, index)


def _pairs(tok, examples, lo: int, hi: int, max_seq_length: int,
           doc_stride: int) -> dict[str, np.ndarray]:
    """Examples lo…hi-1 encoded as pairs by the tokenizer itself (truncation "only_second"
    with stride, overflowing windows): the windows for a tokenizer without a plain pair
    template, and the reference the assembled windows are tested against."""
    old_truncation, old_padding = tok.truncation, tok.padding
    try:
        tok.enable_truncation(max_seq_length, stride=doc_stride, strategy="only_second",
                              direction="right")
        tok.enable_padding(direction="right", pad_id=tok.token_to_id("[PAD]"), pad_type_id=0,
                           pad_token="[PAD]", length=max_seq_length)
        encodings = tok.encode_batch([(ex.question, ex.context) for ex in examples[lo:hi]])
    finally:
        _restore(tok, old_truncation, old_padding)
    # transformers' order: each example's first window, then its overflows
    return _arrays([(lo + i, w) for i, enc in enumerate(encodings)
                    for w in [enc] + enc.overflowing], max_seq_length)


def _arrays(windows: list, max_seq_length: int) -> dict[str, np.ndarray]:
    """(example index, Encoding) pairs → numpy columns, so that Encoding objects (tens of KB
    each, token strings included) live only for one chunk."""
    n = len(windows)

    def column(name: str) -> np.ndarray:  # (n, L) int32 from one Encoding attribute
        return np.asarray([getattr(e, name) for _, e in windows], np.int32).reshape(
            n, max_seq_length)

    offsets = np.asarray([e.offsets for _, e in windows], np.int32).reshape(n, max_seq_length, 2)
    return _columns(column("ids"), column("type_ids"), column("attention_mask"),
                    column("special_tokens_mask"), offsets,
                    np.asarray([i for i, _ in windows], np.int32))


def _columns(ids, types, attention, special, offsets, index) -> dict[str, np.ndarray]:
    """The features' columns; offsets kept for context tokens only: segment 1 and not a
    template special ([SEP]) or padding."""
    is_context = (types == 1) & (special == 0)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": attention,
            "example_index": index,
            "offsets": np.where(is_context[..., None], offsets, -1).astype(np.int32)}


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


def _window_chunks(windows: list[int], size: int):
    """Runs of `size` windows (the last may be shorter), each a list of (example, first
    window, end window): an example's windows may span chunks."""
    segments, room = [], size
    for i, n in enumerate(windows):
        w = 0
        while w < n:
            take = min(n - w, room)
            segments.append((i, w, w + take))
            w, room = w + take, room - take
            if room == 0:
                yield segments
                segments, room = [], size
    if segments:
        yield segments


def _check_lengths(tok, examples, max_seq_length: int, doc_stride: int, special: int,
                   where: str, contexts: Optional[ContextTokens] = None) -> list[int]:
    """Refuse before the Rust tokenizer does: on a stride ≥ the context room it panics (a
    PanicException, which `except Exception` misses), on a question with no room it errors
    without naming the example. Returns each example's number of windows. `contexts` keeps
    the contexts' tokens for the windows."""
    questions = tok.encode_batch([ex.question for ex in examples], add_special_tokens=False)
    lengths = (contexts or ContextTokens(tok)).lengths([ex.context for ex in examples])
    windows = []
    for ex, q in zip(examples, questions):
        room = max_seq_length - len(q.ids) - special  # context tokens per window
        if room < 1:
            raise BertJaxError(f"{where}: question {ex.id!r} has {len(q.ids)} tokens; "
                               f"max_seq_length {max_seq_length} leaves no room for the context")
        if lengths[ex.context] > room and doc_stride >= room:
            raise BertJaxError(f"doc_stride: {doc_stride} must be less than the {room} context "
                               f"tokens a window of max_seq_length {max_seq_length} leaves beside "
                               f"question {ex.id!r} of {where} ({len(q.ids)} tokens), or "
                               f"windows cannot advance")
        beyond = lengths[ex.context] - room  # tokens past the first window, a stride apart
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
