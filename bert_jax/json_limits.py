"""JSON from users and untrusted files, refused in one line when it is nested too deeply.

A jsonl row with one field nested 10,000 brackets deep crashes `datasets` (a segfault inside
pyarrow) and raises RecursionError in `json`; both happen before any of our checks could see the
row. So the nesting depth is measured on the text first, before any parser recurses into it.
"""

from __future__ import annotations

import json
import re

from bert_jax.errors import BertJaxError

# Arrow refuses deeper nested types itself ("Recursion level in ArrowSchema struct exceeded"), so
# no table we could read is deeper; real files (SQuAD, configs, safetensors indexes) nest under 10.
MAX_DEPTH = 64

# a JSON string: its brackets are text, not nesting (a raw newline cannot be inside one)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}\n]")


def too_deep_line(text: str) -> int | None:
    """The 1-based number of the first line of `text` nested deeper than MAX_DEPTH, or None.

    Each line is measured from depth 0, so one unbalanced line (a parse error for the parser to
    report) does not shift the lines after it."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # the common case, at C speed
        return None
    line, depth = 1, 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        c = match.group()
        if c == "\n":
            line, depth = line + 1, 0
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        else:
            depth -= 1
    return None


def check_depth(text: str, where: str, first_line: int = 1) -> None:
    """Refuses `text` (from `where`, starting at line `first_line`) if nested too deeply."""
    line = too_deep_line(text)
    if line is not None:
        raise BertJaxError(f"{where}:{first_line + line - 1}: JSON nested more than {MAX_DEPTH} "
                           f"levels deep")


def loads(text: str, where: str, first_line: int = 1):
    """json.loads of untrusted text, its depth checked first (JSONDecodeError passes through)."""
    check_depth(text, where, first_line)
    return json.loads(text)
