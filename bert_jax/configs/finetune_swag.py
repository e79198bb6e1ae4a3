"""SWAG multiple choice with the paper's recipe (BERT §4.4: 3 epochs, lr 2e-5, batch 16).

Give the data on the command line: `--train train.csv --validation val.csv` (columns sent1,
sent2, ending0..3, label, as the released SWAG files) or `--dataset swag regular` (online).
"""

from bert_jax.training.finetune_config import FinetuneConfig


def get_config() -> FinetuneConfig:
    return FinetuneConfig(
        task="multiple-choice",
        init_from="",  # --init: a pretrained BERT
        max_seq_length=128,  # per candidate: [CLS] sent1 [SEP] sent2 ending [SEP]
        epochs=3,
        batch_size=16,  # questions per batch (× 4 candidates encoded)
        eval_batch_size=32,
        learning_rate=2e-5,
        warmup_ratio=0.1,
        weight_decay=0.01,
        seed=0,
        best_metric="accuracy",
        log_every=50,
        checkpoint_every=500,
    )
