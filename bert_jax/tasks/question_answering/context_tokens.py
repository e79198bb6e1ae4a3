"""Question answering's contexts tokenized once, as arrays, and the tokenizer's pair layout
(`Template`): what `windows.Windows` puts each window together from."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
from typing import Optional, Sequence

import numpy as np

from bert_jax.data.tokenizer import _restore

# characters of contexts per encode_batch call: bounds the Encoding objects alive at once
_ENCODE_CHARS = 1_000_000
# context tokens kept as arrays for later questions (16 bytes a token: ~32 MB)
_CACHED_TOKENS = 1 << 21


@dataclasses.dataclass(frozen=True)
class Tokens:
    """Token columns of one text or template piece: ids, offsets (n, 2), special-token mask,
    and (template pieces only) type ids."""
    ids: np.ndarray
    offsets: np.ndarray
    special: np.ndarray
    types: Optional[np.ndarray] = None

    @staticmethod
    def of(encoding, positions=None, types: bool = False) -> "Tokens":
        """An Encoding's columns, or those at `positions`."""
        take = slice(None) if positions is None else positions
        return Tokens(np.asarray(encoding.ids, np.int32)[take],
                       np.asarray(encoding.offsets, np.int32).reshape(-1, 2)[take],
                       np.asarray(encoding.special_tokens_mask, np.int32)[take],
                       np.asarray(encoding.type_ids, np.int32)[take] if types else None)


@dataclasses.dataclass(frozen=True)
class Template:
    """How the tokenizer's post-processor lays out a pair: the tokens it adds before the
    question (`prefix`), between question and context (`middle`) and after the context
    (`suffix`), and the type ids of question and context tokens; read off a probe pair."""
    prefix: Tokens
    middle: Tokens
    suffix: Tokens
    a_type: int
    b_type: int
    pad_id: int
    pad_type: int = 0  # Windows pads with pad_type_id=0, as transformers does

    @property
    def added(self) -> int:
        return len(self.prefix.ids) + len(self.middle.ids) + len(self.suffix.ids)

    @staticmethod
    def of(tok) -> Optional["Template"]:
        """The template (truncation and padding off), or None if the pair is not laid out as
        specials, question, specials, context, specials, each sequence's tokens its own
        encoding's."""
        pair = tok.encode("a b", "c d")
        seq = [-1 if s is None else s for s in pair.sequence_ids]
        runs = [(k, len(list(g))) for k, g in itertools.groupby(seq)]
        kinds = [k for k, _ in runs]
        if kinds[-1] != -1:
            runs.append((-1, 0))
        if kinds[0] != -1:
            runs.insert(0, (-1, 0))
        kinds = [k for k, _ in runs]
        if kinds not in ([-1, 0, -1, 1, -1], [-1, 0, 1, -1]):
            return None
        if len(kinds) == 4:  # no tokens between the two sequences
            runs.insert(2, (-1, 0))
        bounds = np.cumsum([0] + [n for _, n in runs])
        pieces = [Tokens.of(pair, slice(bounds[j], bounds[j + 1]), types=True)
                  for j in range(5)]
        prefix, a, middle, b, suffix = pieces
        for piece, text in ((a, "a b"), (b, "c d")):
            alone = Tokens.of(tok.encode(text, add_special_tokens=False))
            if (len(set(piece.types.tolist())) != 1 or not np.array_equal(piece.ids, alone.ids)
                    or not np.array_equal(piece.offsets, alone.offsets)
                    or not np.array_equal(piece.special, alone.special)):
                return None
        if prefix.ids.size + middle.ids.size + suffix.ids.size != tok.num_special_tokens_to_add(
                True):
            return None
        return Template(prefix, middle, suffix, int(a.types[0]), int(b.types[0]),
                         tok.token_to_id("[PAD]"))


class ContextTokens:
    """Each distinct context tokenized once, as arrays (Encoding objects, tens of bytes a token
    with the token strings, live only while a batch is converted); the most recently used are
    kept up to `_CACHED_TOKENS` tokens, the last one always."""

    def __init__(self, tok):
        self.tok = tok
        self.cache: collections.OrderedDict[str, Tokens] = collections.OrderedDict()
        self.tokens = 0

    def lengths(self, contexts: Sequence[str]) -> dict[str, int]:
        """Token count of each distinct context."""
        found = {}
        for batch in self._batches(list(dict.fromkeys(contexts))):
            for c, tokens in self._tokens(batch).items():
                found[c] = len(tokens.ids)
        return found

    def of(self, contexts: Sequence[str]) -> dict[str, Tokens]:
        """The tokens of each context (all of them held until the caller lets go)."""
        found = {}
        for batch in self._batches(list(dict.fromkeys(contexts))):
            found.update(self._tokens(batch))
        return found

    def _batches(self, contexts: list[str]):
        """Runs of contexts of about _ENCODE_CHARS characters (one encode_batch call each)."""
        batch, chars = [], 0
        for c in contexts:
            batch.append(c)
            chars += len(c)
            if chars >= _ENCODE_CHARS:
                yield batch
                batch, chars = [], 0
        if batch:
            yield batch

    def _tokens(self, contexts: list[str]) -> dict[str, Tokens]:
        missing = [c for c in contexts if c not in self.cache]
        encoded = dict(zip(missing, (
            Tokens.of(e) for e in self.tok.encode_batch(missing, add_special_tokens=False))))
        found = {}
        for c in contexts:
            if c in encoded:
                self.cache[c] = found[c] = encoded[c]
                self.tokens += len(encoded[c].ids)
            else:
                found[c] = self.cache[c]
                self.cache.move_to_end(c)
        while self.tokens > _CACHED_TOKENS and len(self.cache) > 1:
            _, dropped = self.cache.popitem(last=False)
            self.tokens -= len(dropped.ids)
        return found


@contextlib.contextmanager
def plain(tok):
    """No truncation and no padding while inside, the tokenizer's settings restored after: the
    Tokenizer object is shared, its settings global."""
    old_truncation, old_padding = tok.truncation, tok.padding
    try:
        tok.no_truncation()
        tok.no_padding()
        yield
    finally:
        _restore(tok, old_truncation, old_padding)
