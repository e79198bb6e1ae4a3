"""The default run: BERT-tiny (L2 H128 A2) on the bundled Austen novels, minutes on 2 CPU cores."""

from bert_jax.training.pretrain_config import PretrainConfig


def get_config() -> PretrainConfig:
    return PretrainConfig(
        model="tiny",  # preset: 2 layers, hidden 128, 2 heads, feed-forward 512
        train_files="data/austen/*.txt",  # six novels, 3.9 MB, one document per file
        vocab="",  # train an uncased WordPiece vocabulary into WORKDIR/vocab
        vocab_size=8192,  # small corpus, small vocabulary: fewer rare, untrainable pieces
        max_seq_length=128,  # paper phase 1 length
        max_predictions_per_seq=20,  # 15% of 128, as the original
        eval_fraction=0.02,  # 2% of the sentences, held out by document: one novel's tail
        batch_size=32,
        steps=3000,
        learning_rate=1e-3,  # tiny models take a high rate (Turc et al. use 1e-4…1e-3)
        warmup_steps=300,
        weight_decay=0.01,
        optimizer="adamw",
        dtype="float32",
        seed=0,
        log_every=50,
        eval_every=500,
        eval_batches=0,  # the whole held-out set
        checkpoint_every=500,
        keep_checkpoints=3,
    )
