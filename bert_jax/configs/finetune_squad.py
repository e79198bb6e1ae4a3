"""SQuAD v1.1 span question answering with the paper's recipe (BERT §4.2, run_squad's README).

Give the data on the command line: `--train train-v1.1.json --validation dev-v1.1.json` (the
official files) or `--dataset squad` (online). For SQuAD 2.0 add `--version-2-with-negative`
(or `--dataset squad_v2`; any question without an answer turns it on), as the paper's §4.3.
"""

from bert_jax.training.finetune_config import FinetuneConfig


def get_config() -> FinetuneConfig:
    return FinetuneConfig(
        task="question-answering",
        init_from="",  # --init: a pretrained BERT (ours, a pretraining workdir, or Hugging Face's)
        max_seq_length=384,  # question + context window, [CLS] and [SEP]s included
        doc_stride=128,  # tokens shared by consecutive windows (HF's meaning of the flag)
        max_answer_length=30,  # tokens, as run_squad
        n_best=20,  # start and end candidates per window, as run_squad
        epochs=2,
        batch_size=32,
        eval_batch_size=64,
        learning_rate=3e-5,
        warmup_ratio=0.1,
        weight_decay=0.01,
        seed=0,
        best_metric="f1",  # SQuAD F1 on the validation questions
        log_every=50,
        checkpoint_every=500,
    )
