"""Paper phase 1: BERT-base, sequence length 128, batch 256, 1e-4, 10k warmup (900k steps).

No dupe_factor: sentence pairs are redrawn every epoch, the original's 10 static passes without
ten copies on disk.
"""

from bert_jax.resources import bundled  # package data: found wherever the package is
from bert_jax.training.pretrain_config import PretrainConfig


def get_config() -> PretrainConfig:
    return PretrainConfig(
        model="base",  # 12 layers, hidden 768, 12 heads
        train_files=bundled("austen/*.txt"),  # point at your corpus: --config.train_files='...'
        vocab="",  # a released vocab.txt, or "" to train one into WORKDIR/vocab
        vocab_size=30522,  # as the released uncased vocabulary
        max_seq_length=128,  # phase 1: 90% of the steps at length 128
        max_predictions_per_seq=20,
        eval_fraction=0.005,
        batch_size=256,
        steps=900_000,  # 90% of the paper's 1M steps; phase 2 does the last 100k
        learning_rate=1e-4,
        warmup_steps=10_000,
        weight_decay=0.01,
        optimizer="adamw",
        dtype="bfloat16",  # matmuls in bfloat16, params and LayerNorm in float32
        seed=0,
        log_every=100,
        eval_every=10_000,
        eval_batches=50,
        checkpoint_every=5_000,
        keep_checkpoints=3,
    )
