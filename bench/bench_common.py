"""What the bench scripts share: the checkout's root, and the test helpers some benchmarks reuse
(their data fixtures) loaded by path, so that no script edits sys.path.

Run a script from the repository root as `python bench/NAME.py` (with bert_jax installed, e.g.
`pip install -e .`): Python puts bench/ on sys.path then, so scripts import each other plainly
(`import bench_pretrain`); pytest does the same through pyproject's `pythonpath = ["bench"]`.
"""

import hashlib
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tests_module(name: str):
    """tests/NAME.py as a module (tests/ is no package: its helpers are loaded by path)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def files_sha256(paths: list[str]) -> str:
    """sha256 of the files' bytes one after another, read a megabyte at a time (not
    hashlib.file_digest: that is Python 3.11+, the package says 3.10)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
