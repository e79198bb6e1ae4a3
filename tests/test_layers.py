"""The package's shape: lower layers never import higher ones, and no module outgrows a read.

Layers, lowest first: errors, json_limits, resources, models/ops, models, data, model_files,
checkpoints (model_files' deprecated old import path, kept for the documented API), runtime,
inference, tasks, training, glue (the benchmark and its job, which fine-tunes tasks with
training's finetune job), configs (the bundled run configs), cli.
Every `import` in every module (function-level ones included) is checked, so a shortcut from,
say, data/ into training/ fails here rather than in a reviewer's head.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "bert_jax")
LAYERS = ["errors", "json_limits", "resources", "models.ops", "models", "data", "model_files",
          "checkpoints", "runtime", "inference", "tasks", "training", "glue", "configs", "cli"]
MAX_LINES = 350


def _modules():
    for directory, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield dotted.removesuffix(".__init__"), path


def _layer(module: str) -> int:
    """Index in LAYERS of a bert_jax.* module (the longest matching prefix wins)."""
    inner = module.removeprefix("bert_jax").lstrip(".")
    best = None
    for i, layer in enumerate(LAYERS):
        if inner == layer or inner.startswith(layer + "."):
            if best is None or len(layer) > len(LAYERS[best]):
                best = i
    assert best is not None, f"{module} is in no layer; add it to LAYERS"
    return best


def _imports(path: str, module: str):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:  # `from bert_jax.data import batches` imports a module
                yield node.lineno, f"{base}.{alias.name}" if base == "bert_jax" else base


MODULES = [m for m in _modules() if m[0] != "bert_jax"]  # the package facade re-exports


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_no_import_from_a_higher_layer(module, path):
    own = _layer(module)
    upward = [f"line {line}: {target} ({LAYERS[_layer(target)]})"
              for line, target in _imports(path, module)
              if target.startswith("bert_jax.") and _layer(target) > own]
    assert not upward, f"{module} ({LAYERS[own]}) imports from a higher layer: {upward}"


def test_no_module_over_the_size_limit():
    sizes = {module: sum(1 for _ in open(path, encoding="utf-8")) for module, path in _modules()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: an upward import in a lower layer is reported."""
    path = tmp_path / "x.py"
    path.write_text("from bert_jax.training import loop\nimport bert_jax.cli\n")
    targets = [t for _, t in _imports(str(path), "bert_jax.data.x")]
    assert targets == ["bert_jax.training", "bert_jax.cli"]
    assert [_layer(t) > _layer("bert_jax.data.x") for t in targets] == [True, True]


def test_bench_scripts_leave_sys_path_alone():
    """bench/ scripts import each other as `python bench/x.py` (and pytest's pythonpath) put
    bench/ on sys.path; none edits sys.path (bench/bench_common.py loads test helpers by path)."""
    edits = []
    bench = os.path.join(ROOT, "bench")
    for name in sorted(os.listdir(bench)):
        if name.endswith(".py"):
            tree = ast.parse(open(os.path.join(bench, name), encoding="utf-8").read())
            edits += [f"{name}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr in ("insert", "append")
                      and ast.unparse(node.value) == "sys.path"]
    assert edits == []
