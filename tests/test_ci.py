"""README's test line is what CI runs, then the slow tier; pytest refuses unregistered markers."""

import os

from conftest import ROOT


def readme_commands() -> list[str]:
    """The command lines of README's first code block."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        block = f.read().split("```bash\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_ci_runs_readmes_test_line_verbatim_then_the_slow_tier():
    line = readme_commands()[1]
    assert line.startswith("pip install torch==") and " -m 'not slow' --durations=25 " in line
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read().splitlines()
    at = [i for i, text in enumerate(ci) if text in (line, line + " || exit")]
    assert len(at) == 1, "README's second command line is not in .ci/run verbatim"
    after = [text for text in ci[at[0] + 1:] if "pytest" in text and not text.startswith("#")]
    assert after == ["python -m pytest -q -m slow --durations=25 tests"]


def test_markers_are_registered_strictly(pytestconfig):
    assert "--strict-markers" in pytestconfig.getini("addopts")
    assert "slow" in [m.split(":")[0] for m in pytestconfig.getini("markers")]
