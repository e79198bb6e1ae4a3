"""Installed = usable, end to end: the sdist and the wheel build and pass `twine check`, and the
wheel installed into a fresh venv pretrains on its bundled corpus and fills a mask from an
empty directory, with no source tree on the path. Minutes (a venv of JAX and its friends): the
slow tier."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from bert_jax.resources import VERSION
from conftest import ROOT

pytestmark = pytest.mark.slow


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc.stdout


def test_the_wheel_installed_in_a_fresh_venv_pretrains_and_fills_a_mask_anywhere(tmp_path):
    # what the build reads, copied: building in the checkout would leave build/ and egg-info
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), source / name)
    shutil.copytree(os.path.join(ROOT, "bert_jax"), source / "bert_jax",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], tmp_path, env)
    wheels = sorted(dist.glob("*.whl"))
    sdists = sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == len(sdists) == 1, os.listdir(dist)
    checked = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, wheels + sdists)],
                   tmp_path, env)
    assert checked.count("PASSED") == 2, checked
    # every module of the source tree is in the wheel (a renamed or new subpackage included)
    modules = {os.path.relpath(os.path.join(d, f), source).replace(os.sep, "/")
               for d, _, files in os.walk(source / "bert_jax") for f in files if f.endswith(".py")}
    packed = {name for name in zipfile.ZipFile(wheels[0]).namelist() if name.endswith(".py")}
    assert sorted(modules - packed) == []

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    python, bert_jax = venv / "bin" / "python", venv / "bin" / "bert-jax"
    _run([python, "-m", "pip", "install", "--quiet", str(wheels[0])], tmp_path, env)

    empty = tmp_path / "empty"
    empty.mkdir()
    env.update(BERT_JAX_CACHE=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    where = _run([python, "-c", "import bert_jax; print(bert_jax.__file__)"], empty, env).strip()
    assert where.startswith(str(venv) + os.sep), where  # the installed copy, not the checkout
    assert _run([bert_jax, "--version"], empty, env).strip() == f"bert-jax {VERSION}"

    out = _run([bert_jax, "pretrain", "--config", "tiny", "--workdir", "w",
                "--config.time_budget_minutes=0", "--config.steps=2"], empty, env)
    assert "done: 2 steps in w;" in out and "Hugging Face export in w/export" in out, out
    assert os.path.isfile(empty / "w" / "export" / "model.safetensors")
    card = (empty / "w" / "export" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "model-index:" in card  # the model card, installed too
    out = _run([bert_jax, "fill-mask", "w/export", "she was [MASK] happy."], empty, env)
    assert len([line for line in out.splitlines() if line.strip()]) >= 5, out
    env_record = json.loads(_run([bert_jax, "env", "--json"], empty, env))
    assert env_record["versions"]["bert_jax"] == VERSION
    assert env_record["platform"]["executable"].startswith(str(venv))
    # nothing read from or written to the working directory but the named workdir: the
    # prepared corpus went to the user cache
    assert os.listdir(empty) == ["w"]
    assert [p for p in os.listdir(tmp_path / "cache") if p.startswith("prepared-")]
