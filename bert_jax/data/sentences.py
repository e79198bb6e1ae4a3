"""Sentence splitting for wrapped prose: rule-based, knows titles (Mr., Mrs., …) and initials."""

from __future__ import annotations

import re

# A sentence ends at . ! or ? (closing quotes/brackets/underscores may follow) before whitespace
# and a capital letter or digit, unless the word before is a title or an initial.
_SENTENCE_END = re.compile(r"""[.!?]+["'”’)\]_]*\s+(?=["'“‘(\[_]*[A-Z0-9])""")
_ABBREVIATIONS = frozenset("mr mrs ms dr st messrs mme mlle col capt gen lt rev sr jr esq prof "
                           "vol no ch fig mt".split())
_LAST_WORD = re.compile(r"[A-Za-z]+$")


def split_sentences(paragraph: str, sentence_per_line: bool = False) -> list[str]:
    """A block of text (no blank lines) → its sentences, whitespace normalised."""
    if sentence_per_line:
        return [s for s in (" ".join(line.split()) for line in paragraph.split("\n")) if s]
    text = " ".join(paragraph.split())
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        last = _LAST_WORD.search(text, start, match.start())  # "--Mrs." → "Mrs"
        last = last.group(0).lower() if last else ""
        if last in _ABBREVIATIONS or len(last) == 1:
            continue
        sentences.append(text[start:match.end()].strip())
        start = match.end()
    if text[start:].strip():
        sentences.append(text[start:].strip())
    return sentences
