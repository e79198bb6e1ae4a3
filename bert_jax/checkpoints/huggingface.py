"""Deprecated alias of bert_jax.model_files.huggingface (the package warns on import)."""

import sys

from bert_jax.model_files import huggingface

sys.modules[__name__] = huggingface  # the same module object: its functions, classes and patches
