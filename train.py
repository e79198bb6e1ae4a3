"""Pretrain BERT (MLM + NSP): python train.py [--config configs/FILE.py] [--workdir DIR]
[--config.FIELD=VALUE ...]. With no arguments: BERT-tiny on the bundled corpus into runs/tiny."""

import sys

from bert_jax.cli import main

if __name__ == "__main__":
    sys.exit(main(["pretrain", *sys.argv[1:]]))
