"""Deprecated: bert_jax.checkpoints is bert_jax.model_files now (issue 40: the name said
"checkpoints" for model directories, as runtime/ and cli/ did for other things).

The modules the Python API documents keep working here for now: `bert_jax.checkpoints.model_dir`
and `bert_jax.checkpoints.huggingface` are the very modules of bert_jax.model_files. Importing
this package warns (DeprecationWarning); nothing in bert_jax imports it.
"""

import warnings

warnings.warn("bert_jax.checkpoints is deprecated: import bert_jax.model_files (model_dir, "
              "huggingface, ...) instead", DeprecationWarning, stacklevel=2)
