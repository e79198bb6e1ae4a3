"""Pretrain BERT (MLM + NSP): python train.py [--config NAME|FILE.py] [--workdir DIR]
[--config.FIELD=VALUE ...]. With no arguments: BERT-tiny on the bundled corpus into runs/tiny.
NAME is a bundled config's (tiny, base, base_phase2, pretrain_tiny, …; configs/ holds them)."""

import sys

from bert_jax.cli import main

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))
