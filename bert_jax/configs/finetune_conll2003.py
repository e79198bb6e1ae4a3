"""CoNLL-2003 English NER, fine-tuned as the paper's §5.3: a tag per word, read at its first
word piece, entity F1 with strict spans.

Give the data on the command line: `--train eng.train --validation eng.testa --test eng.testb`
(CoNLL text: word first, tag last; IOB1 files are read as IOB2) or `--dataset conll2003`
(online; its tags are `ner_tags`). For POS or chunking give another column with
`--tags-column` (jsonl / hub) — tags that are not chunk tags are scored by word accuracy.
"""

from bert_jax.training.finetune_config import FinetuneConfig


def get_config() -> FinetuneConfig:
    return FinetuneConfig(
        task="token-classification",
        init_from="",  # --init: a pretrained BERT (cased vocabularies suit NER best, as the paper)
        tokens_column="tokens",  # jsonl / hub data: the list of words
        tags_column="ner_tags",  # conll2003's NER tags (ClassLabel ids, read as names)
        max_seq_length=128,  # longer sentences are split into windows, never cut
        epochs=3,  # the paper's grid: 2, 3, 4 epochs; 5e-5, 3e-5, 2e-5; batch 16, 32
        batch_size=32,
        eval_batch_size=64,
        learning_rate=5e-5,
        warmup_ratio=0.1,
        weight_decay=0.01,
        seed=0,
        best_metric="f1",  # entity F1 (strict span match)
        log_every=50,
        checkpoint_every=500,
    )
