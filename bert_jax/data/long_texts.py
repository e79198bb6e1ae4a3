"""Texts far longer than the model: cut before tokenizing, so memory follows max_seq_length,
not the longest field, and no output changes.

Tokenizing a 50 MB field whole costs about 9 GB (offsets and alignments per character) to keep
a few hundred tokens. A text is cut only beyond max_seq_length × CHARS_PER_TOKEN characters,
and only where the cut keeps more than max_seq_length + WORD_PIECES tokens; its first
max_seq_length tokens are then exactly the full text's. The reason: the BERT normaliser works
character by character and the pre-tokenizer splits at spaces and punctuation, so a cut
changes only the pieces of the word it falls in, and WordPiece gives a word at most
WORD_PIECES pieces (a longer word is one [UNK]). A prefix with too few tokens (long [UNK]
words) is doubled until it has enough, or is the whole text.

A word longer than WordPiece's limit is one [UNK] however long, so a field that is one giant
word (a hex dump without spaces) would never reach enough tokens to cut: first, every run of
letters and digits past the limit is shortened to one character more than it. Lowercasing and
accent stripping never turn a letter or digit into nothing or into a separator, so the word
around the run stays longer than the limit, one [UNK], and no token changes. (CJK characters
are letters too but words of one character each: runs of them are left alone.) What stays
unbounded: tens of megabytes of characters the normaliser deletes (control and format
characters), which join the words around them.

A pair is cut so that truncation, which trims the longer segment first and gives it the odd
token, sees the same segment as the longer one: the longer is cut to more tokens than the
other keeps (both are counted, a chunk at a time, when both are long). Untruncated, a long
pair costs more still: the tokenizer builds its overflowing windows, pairs of them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional, Sequence

from tokenizers import Tokenizer

CHARS_PER_TOKEN = 100  # generous: English WordPiece averages under 5 characters a token
WORD_PIECES = 100  # WordPiece's max_input_chars_per_word: a longer word is one [UNK]
CHUNK = 1 << 18  # characters tokenized at once to count a long text's tokens
_CJK = ("\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002ceaf"
        "\U0002f800-\U0002fa1f")  # the BERT normaliser's "Chinese characters": a word each


def cut_texts(tokenizer: Tokenizer, texts: Sequence[str], pairs: Optional[Sequence[str]],
              max_seq_length: int) -> tuple[list[str], Optional[list[str]]]:
    """`texts` (and `pairs`) with every segment far beyond `max_seq_length` tokens cut; call it with
    the tokenizer's truncation and padding off."""
    texts = [_shorten_words(tokenizer, t, max_seq_length) for t in texts]
    if pairs is None:
        return [_cut(tokenizer, t, max_seq_length) or t for t in texts], None
    pairs = [_shorten_words(tokenizer, t, max_seq_length) for t in pairs]
    cut = [_cut_pair(tokenizer, a, b, max_seq_length) for a, b in zip(texts, pairs)]
    return [a for a, _ in cut], [b for _, b in cut]


def _shorten_words(tokenizer: Tokenizer, text: str, keep: int) -> str:
    """`text` with each run of letters and digits longer than the tokenizer's word limit cut
    to one character past it (the same tokens: see the module's docstring); a text too short
    to be cut is returned as it is."""
    limit = getattr(tokenizer.model, "max_input_chars_per_word", None)
    if len(text) <= keep * CHARS_PER_TOKEN or not isinstance(limit, int):
        return text  # short, or not WordPiece: nothing to shorten
    return _long_run(limit).sub(lambda m: m.group()[:limit + 1], text)


@lru_cache(maxsize=4)
def _long_run(limit: int) -> re.Pattern:
    return re.compile(rf"[^\W_{_CJK}]{{{limit + 2},}}")


def _cut(tokenizer: Tokenizer, text: str, keep: int) -> Optional[str]:
    """A prefix of `text` whose first `keep` tokens are the text's, or None: the text is short
    enough to tokenize whole."""
    n = keep * CHARS_PER_TOKEN
    while n < len(text):
        prefix = text[:n]
        if _count(tokenizer, prefix) > keep + WORD_PIECES:
            return prefix
        n *= 2
    return None


def _cut_pair(tokenizer: Tokenizer, a: str, b: str, keep: int) -> tuple[str, str]:
    """Both segments cut where long, keeping which of them has more tokens (truncation gives
    the longer one the odd token): the longer one is cut to more tokens than the other keeps."""
    cut_a, cut_b = _cut(tokenizer, a, keep), _cut(tokenizer, b, keep)
    if cut_a is None and cut_b is None:
        return a, b
    if cut_b is None:  # a is cut to more tokens than b has, or stays whole
        return _cut(tokenizer, a, max(keep, _count(tokenizer, b) + 1)) or a, b
    if cut_a is None:
        return a, _cut(tokenizer, b, max(keep, _count(tokenizer, a) + 1)) or b
    if _count(tokenizer, a) > _count(tokenizer, b):
        return _cut(tokenizer, a, _count(tokenizer, cut_b) + 1) or a, cut_b
    return cut_a, _cut(tokenizer, b, _count(tokenizer, cut_a) + 1) or b


def _count(tokenizer: Tokenizer, text: str) -> int:
    """Tokens in `text`, counted a chunk at a time so that memory follows CHUNK: chunks end at a
    space, where the BERT pre-tokenizer splits anyway (a word longer than a chunk is one)."""
    total, start = 0, 0
    while start < len(text):
        end = start + CHUNK
        if end < len(text):
            space = text.rfind(" ", start, end)
            end = space if space > start else (text.find(" ", end) % (len(text) + 1) or len(text))
        total += len(tokenizer.encode(text[start:end], add_special_tokens=False).ids)
        start = end
    return total
