"""The documentation holds together: the site builds in strict mode, and every relative link and
anchor in README.md, docs/ and bench/RESULTS.md resolves.

MkDocs checks the site's own links and anchors (with its slugs); the site does not hold README.md
or bench/RESULTS.md, which readers open on GitHub, so those are checked here with GitHub's
heading slugs — and docs/ too, since its pages are read on GitHub as well.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import bench_module

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["README.md", "bench/RESULTS.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PAGE = bench_module("results_page")  # GitHub's heading anchors, shared with RESULTS' contents
github_slug = PAGE.github_anchor


def anchors(path):
    """Every anchor a markdown file offers: its headings' (repeats numbered as GitHub does) and
    explicit `<a id=…>` targets."""
    text = path.read_text(encoding="utf-8")
    found = {anchor for _, _, anchor in PAGE.headings(text)}
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", _FENCE.sub("", text)))
    return found


def links(path):
    """(target, line number) for every markdown link and image outside code."""
    text = path.read_text(encoding="utf-8")
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # keep line numbers
    text = _CODE.sub(blank, _FENCE.sub(blank, text))
    for m in _LINK.finditer(text):
        yield m.group(1), text.count("\n", 0, m.start()) + 1


def broken_links(root, names):
    """One line per relative link or anchor in `names` that does not resolve."""
    broken = []
    for name in names:
        source = root / name
        for target, line in links(source):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (source.parent / file).resolve() if file else source
            where = f"{name}:{line}: {target}"
            if not dest.exists():
                broken.append(f"{where}: no file {dest.relative_to(root.resolve())}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading with anchor #{anchor}")
    return broken


def test_github_slugs_match_githubs_rules():
    assert github_slug("Does pretraining pay?") == "does-pretraining-pay"
    assert github_slug("Pretraining step, CPU — 2026-12-06") == "pretraining-step-cpu--2026-12-06"
    assert github_slug("`bert-jax env` and [caches](x.md)") == "bert-jax-env-and-caches"
    assert github_slug("Time_to accuracy") == "time_to-accuracy"


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "a.md").write_text(
        "# Top\n## Top\n[ok](#top-1) [ok](b.md#sub) [bad](#nope) [bad](c.md)\n"
        "`[code](ignored.md)`\n```\n[fenced](ignored.md)\n```\n![img](b.md)\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("## Sub\n", encoding="utf-8")
    broken = broken_links(tmp_path, ["a.md"])
    assert broken == ["a.md:3: #nope: no heading with anchor #nope",
                      "a.md:3: c.md: no file c.md"]


def test_every_relative_link_and_anchor_resolves():
    assert broken_links(ROOT, CHECKED) == []


def test_readme_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; the guides in docs/ hold the rest"


def test_the_site_builds_in_strict_mode(tmp_path):
    """A broken link, a missing anchor, a page out of the nav or an API page whose object moved
    fails the build."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert (tmp_path / "site" / "pretraining" / "index.html").exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "bert_jax.model" in api  # the API pages were generated from the docstrings


def test_results_page_is_today_then_the_history_newest_first():
    """bench/RESULTS.md: "Today" first, each benchmark with a date and the command that
    reproduces it; then every dated section, newest first, each listed in the contents."""
    text = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert text.index("## Today") < text.index(PAGE.HISTORY)
    today = text.split("## Today", 1)[1].split("\n## ", 1)[0]
    for block in today.split("\n### ")[1:]:
        title = block.splitlines()[0]
        assert PAGE.DATE.search(block), f"Today's '{title}' has no date"
        assert re.search(r"`python (bench/\w+\.py|train\.py)", block), f"'{title}': no command"
    dates = [PAGE.DATE.search(h).group(1) for h in PAGE.history_headings(text)]
    assert len(dates) >= 25 and dates == sorted(dates, reverse=True)
    assert PAGE.with_contents(text) == text, "run results_page.with_contents: contents are stale"


def test_a_bench_section_goes_on_top_of_the_history_and_into_the_contents(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text((ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8"), "utf-8")
    PAGE.add_section("### Pretraining step, CPU — 2099-01-01\n\n| a |\n|---|\n| 1 |\n", path)
    text = path.read_text(encoding="utf-8")
    assert PAGE.history_headings(text)[0] == "Pretraining step, CPU — 2099-01-01"
    assert "- [Pretraining step, CPU — 2099-01-01](#pretraining-step-cpu--2099-01-01)" in text
    assert broken_links(tmp_path, ["RESULTS.md"]) == [
        f"RESULTS.md:{i + 1}: {target}: no file {target}"  # its pictures are not copied
        for i, line in enumerate(text.splitlines())
        for target in re.findall(r"\]\(([\w./-]+\.png)\)", line)]
