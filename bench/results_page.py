"""bench/RESULTS.md's layout, kept by code: "Today" first (the latest figure of every benchmark),
then the history, newest first, under a table of contents that lists every dated section.

Bench scripts call `add_section` to put a new dated section at the top of the history (it was
appended at the end before, so a reader scrolled past a month of figures to find today's) and
the contents are rebuilt from the headings, so they cannot drift from the sections.
"""

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HISTORY = "## History, newest first"
TOC_START, TOC_END = "<!-- contents: made by bench/results_page.py -->", "<!-- /contents -->"
NEWEST = "<!-- new sections go here, newest first -->"
DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)\b")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped (a link keeps its text), lower case,
    punctuation removed, each space a hyphen (so "A — B" gives "a--b")."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str, str]]:
    """(level, title, anchor) of every heading outside fenced code, in page order; a repeated
    anchor is numbered as GitHub numbers it (-1, -2, …)."""
    found, fenced, seen = [], False, {}
    for line in text.splitlines():
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        m = None if fenced else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = github_anchor(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.append((len(m.group(1)), m.group(2), slug if n == 0 else f"{slug}-{n}"))
    return found


def history_headings(text: str) -> list[str]:
    """The `###` headings of the history, in page order."""
    return [title for level, title, _ in headings(text.split(HISTORY, 1)[1]) if level == 3]


def contents(text: str) -> str:
    """The history's table of contents: one link per dated section."""
    start = text.index(HISTORY)
    before = len(headings(text[:start]))
    return "\n".join(f"- [{title}](#{anchor})" for level, title, anchor
                     in headings(text)[before:] if level == 3)


def with_contents(text: str) -> str:
    """`text` with its contents block rebuilt."""
    head, rest = text.split(TOC_START, 1)
    _, tail = rest.split(TOC_END, 1)
    return f"{head}{TOC_START}\n{contents(text)}\n{TOC_END}{tail}"


def add_section(section: str, path: Path = RESULTS) -> None:
    """Put a new dated section (starting with its `### ` heading) at the top of the history."""
    if not section.startswith("### ") or not DATE.search(section.splitlines()[0]):
        raise ValueError("a section starts with a '### ' heading that carries its date")
    text = path.read_text(encoding="utf-8")
    if NEWEST not in text:
        raise ValueError(f"{path}: no '{NEWEST}' line to insert after")
    text = text.replace(NEWEST, f"{NEWEST}\n\n{section.strip()}\n", 1)
    path.write_text(with_contents(text), encoding="utf-8")
    print(f"{path}: new section at the top of the history; update its row under 'Today' by hand")
