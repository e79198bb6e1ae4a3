"""Old import paths of the documented Python API (docs/api.md) that issue 40 renamed: each still
imports, warns with DeprecationWarning naming the new path, and is the new module itself; and
nothing in the checkout imports an old path."""

import importlib
import os
import re
import sys

import pytest

from bert_jax.model_files import huggingface, model_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIMS = {"bert_jax.checkpoints.model_dir": model_dir,
         "bert_jax.checkpoints.huggingface": huggingface}


def _forget(monkeypatch, package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("old", sorted(SHIMS))
def test_an_old_path_warns_and_is_the_new_module(old, monkeypatch):
    _forget(monkeypatch, "bert_jax.checkpoints")
    with pytest.warns(DeprecationWarning, match=r"bert_jax\.model_files"):
        module = importlib.import_module(old)
    assert module is SHIMS[old]
    assert sys.modules[old] is SHIMS[old]


def test_from_imports_of_the_old_path_get_the_new_objects(monkeypatch):
    _forget(monkeypatch, "bert_jax.checkpoints")
    with pytest.warns(DeprecationWarning):
        from bert_jax.checkpoints.huggingface import save_hf
        from bert_jax.checkpoints.model_dir import load_pretrained
    assert load_pretrained is model_dir.load_pretrained
    assert save_hf is huggingface.save_hf


def test_nothing_here_imports_an_old_path():
    old = re.compile(r"^\s*(from|import)\s+bert_jax\.checkpoints\b", re.M)
    paths = [os.path.join(ROOT, "train.py")]
    for top in ("bert_jax", "bench", "tests"):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            paths += [os.path.join(directory, name) for name in files if name.endswith(".py")]
    shims = (os.path.join(ROOT, "bert_jax", "checkpoints"), os.path.abspath(__file__))
    found = [os.path.relpath(p, ROOT) for p in paths
             if not p.startswith(shims) and old.search(open(p, encoding="utf-8").read())]
    assert found == []
