"""What the bench scripts share: the checkout's root, and the test helpers some benchmarks reuse
(their data fixtures) loaded by path, so that no script edits sys.path.

Run a script from the repository root as `python bench/NAME.py` (with bert_jax installed, e.g.
`pip install -e .`): Python puts bench/ on sys.path then, so scripts import each other plainly
(`import bench_pretrain`); pytest does the same through pyproject's `pythonpath = ["bench"]`.
"""

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
