"""Paper phase 2: the last 10% of steps at sequence length 512, initialised from phase 1.

Run it into its own workdir after phase 1 finished in runs/base:
  bert-jax pretrain --config base_phase2   (or python train.py --config base_phase2)
"""

import pretrain_base  # the phase 1 config beside this file


def get_config():
    return pretrain_base.get_config().replace(
        init_from="runs/base",  # the phase 1 workdir: its latest checkpoint's params
        vocab="runs/base/vocab/tokenizer.json",  # phase 1's vocabulary, not a new one
        max_seq_length=512,  # long sequences teach the position embeddings past 128
        max_predictions_per_seq=80,  # 15% of 512
        steps=100_000,
        warmup_steps=1_000,  # a fresh optimiser state: a brief warmup again
    )
