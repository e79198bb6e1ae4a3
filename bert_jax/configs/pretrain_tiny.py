"""The default run: BERT-tiny (L2 H128 A2) on the bundled Austen novels, a 14-minute budget on
2 CPU cores (the recipe bench/time_to_accuracy.py measured best; bench/RESULTS.md)."""

from bert_jax.resources import bundled  # package data: found wherever the package is
from bert_jax.training.pretrain_config import PretrainConfig


def get_config() -> PretrainConfig:
    return PretrainConfig(
        model="tiny",  # preset: 2 layers, hidden 128, 2 heads, feed-forward 512
        train_files=bundled("austen/*.txt"),  # six novels, 3.9 MB, one document per file
        vocab=bundled("austen/vocab"),  # uncased WordPiece, 8,192 pieces, trained on these novels
        #   (train_tokenizer, as `bert-jax tokenizer`) and bundled: the `tokenizers` trainer
        #   breaks ties in hash-map order, so two trainings order hundreds of ids differently
        #   and a run would not repeat; vocab="" trains one into WORKDIR/vocab, for your corpus
        vocab_size=8192,  # small corpus, small vocabulary: fewer rare, untrainable pieces
        objective="mlm+nsp",  # the paper's: NSP costs nothing measurable here (RESULTS)
        dropout=0.0,  # minutes of training, 28 epochs at most: nothing to regularise yet
        position_init="sinusoidal",  # learned positions, started as sinusoids …
        position_scale=4.0,  # … at 4× the token embeddings' scale: mostly "where" at first
        mimetic_qk=0.08,  # W_k starts as W_q: attention starts local, which ends the plateau
        max_seq_length=128,  # paper phase 1 length
        max_predictions_per_seq=20,  # 15% of 128, as the original
        eval_fraction=0.02,  # 2% of the sentences, held out by document: one novel's tail
        batch_size=32,
        time_budget_minutes=14.0,  # the rate decays to 0 with the clock; stop, save, export
        steps=100_000,  # a cap the budget ends first (a step-based run: time_budget_minutes=0)
        learning_rate=2e-3,  # the highest that trains here; 5e-3 collapses to unigrams
        warmup_steps=1000,  # long: at 300, heads collapse onto frequent words (the plateau)
        weight_decay=0.01,
        optimizer="adamw",
        dtype="float32",
        seed=0,
        log_every=50,
        eval_every=1000,
        eval_batches=0,  # the whole held-out set
        probe_file=bundled("fine_foods/train.csv"),  # at every evaluation, a linear probe on the
        #   frozen features of 2,000 training reviews (never the test file): does it pay yet?
        checkpoint_every=500,
        keep_checkpoints=3,
    )
