"""Deprecated alias of bert_jax.model_files.model_dir (the package warns on import)."""

import sys

from bert_jax.model_files import model_dir

sys.modules[__name__] = model_dir  # the same module object: its functions, classes and patches
