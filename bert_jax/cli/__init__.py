"""The `bert-jax` console script: the only place that knows flag names.

One module per command group (jobs: pretrain, finetune; checkpoints: convert, parity; use:
predict, fill-mask, embed; vocab: tokenizer); main.py builds the parser and turns errors into
one line on stderr.
"""

from bert_jax.cli.main import main

__all__ = ["main"]
