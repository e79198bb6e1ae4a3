"""Token classification (NER, POS, chunking), in one place: `data` reads word-tagged sentences
and cuts first-piece-labelled windows, `scores` is word accuracy and entity precision / recall /
F1; here are the loss, the Task and `predict`'s tag per word.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from typing import Optional, Sequence

from bert_jax.model_files import atomic
from bert_jax.errors import BertJaxError
from bert_jax.tasks import table_files
from bert_jax.tasks.task import (INPUTS, EvalSplit, Predictor, PredictRequest, Task, TaskData,
                                 inputs_of, require_train, split_files)
from bert_jax.tasks.token_classification import data, scores

log = logging.getLogger("bert_jax")
CONLL_TYPES = (".conll", ".txt", ".iob", ".bio", ".tsv")  # CoNLL text: a word per line


def load(cfg, tok) -> TaskData:
    splits = data.load_splits(cfg.dataset, cfg.dataset_config, split_files(cfg),
                              cfg.tokens_column, cfg.tags_column,
                              conll_column=cfg.conll_column)
    require_train(splits)
    names = data.tag_names(splits["train"][2])
    if len(names) < 2:
        raise BertJaxError(f"{splits['train'][0]}: the tags column has one tag ({names[0]}); "
                           f"token classification needs at least two")
    scheme = scores.chunk_scheme(names)
    if scheme is None:
        log.info("tags %s are not chunk tags (B-/I-/E-/S-): word accuracy only",
                 ", ".join(names[:5]) + (" …" if len(names) > 5 else ""))
    train, evals = None, {}
    for split, (where, sentences, tags) in splits.items():
        feats = data.encode(tok, sentences, cfg.max_seq_length, tags, names, where)
        if split == "train":
            train = {k: feats[k] for k in INPUTS + ("labels",)}
            continue
        gold = [[names.index(t) for t in row] for row in tags]
        evals[split] = EvalSplit(inputs_of(feats), lambda logits, feats=feats, gold=gold:
                                 (_tag_scores(logits, feats, gold, names, scheme), None))
    # entity scores need chunk tags: POS tags have word accuracy only
    return TaskData(names, train, evals, ("accuracy",) if scheme is None else TASK.metrics)


def _tag_scores(logits, feats: dict, gold: list, names: tuple, scheme: Optional[str]) -> dict:
    """Word accuracy over every word of every sentence; entity precision / recall / F1 (strict
    spans) when the tags are chunk tags."""
    predicted = data.word_predictions(logits, feats, len(gold), [len(g) for g in gold])
    out = {"accuracy": scores.token_accuracy(gold, predicted),
           "sentences": len(gold), "words": sum(map(len, gold))}
    if scheme is not None:
        as_names = lambda rows: [[names[i] for i in row] for row in rows]  # noqa: E731
        out.update(scores.entity_scores(as_names(gold), as_names(predicted), scheme))
    return out


def loss(logits, batch: dict) -> dict:
    """Per-position tagging: logits (B, L, C), labels (B, L) with -100 where nothing is scored
    (special tokens, padding, a word's later pieces). Averaged over scored positions."""
    import jax.numpy as jnp
    import optax
    labels = batch["labels"]
    weights = (labels >= 0).astype(jnp.float32)
    safe = jnp.maximum(labels, 0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, safe)  # (B, L)
    correct = (jnp.argmax(logits, -1) == safe).astype(jnp.float32)
    n = weights.sum()
    return {"loss": ((ce * weights).sum(), n), "accuracy": ((correct * weights).sum(), n)}


def summary(r: dict) -> str:
    line = f"{r['words']} words: accuracy {r['accuracy']:.4f}"
    if "f1" in r:
        line += (f", entity precision {r['precision']:.4f}, recall {r['recall']:.4f}, F1 "
                 f"{r['f1']:.4f}")
    return line


# -- predict -----------------------------------------------------------------------------------

def tag_words(config, params, tok, sentences: Sequence[Sequence[str]], max_seq_length: int = 128,
              batch_size: int = 32) -> list[list[str]]:
    """One tag per word of each sentence (words as given: CoNLL tokens), read at each word's
    first piece; a sentence longer than max_seq_length is tagged window by window, never cut."""
    import jax

    from bert_jax import inference
    from bert_jax.data import buckets
    inference.require_architecture(config, params, TASK.architecture)
    inference.check_sizes(config, max_seq_length, batch_size)
    feats = data.encode(tok, sentences, max_seq_length)
    apply = functools.partial(inference.jitted(_token_logits), config, jax.device_put(params))
    logits = buckets.run(apply, inputs_of(feats), batch_size, per_position=True)
    ids = data.word_predictions(logits, feats, len(sentences), [len(s) for s in sentences])
    return [[config.id2label[int(i)] for i in row] for row in ids]


def _token_logits(config, params, batch):
    """(B, L, num_labels) logits of a BertForTokenClassification."""
    from bert_jax.models import BertForTokenClassification
    return BertForTokenClassification(config).apply(
        {"params": params}, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])


def _read_sentences(request: PredictRequest) -> list[list[str]]:
    """CoNLL text (a word per line, first column), or rows with a list of words."""
    if os.path.splitext(request.input)[1].lower() not in (".jsonl", ".json", ".parquet"):
        return data.read_conll(request.input, tags=False)[0]
    table = table_files.read_table(request.input)
    table_files.check_columns(table, request.input, [request.tokens_column])
    sentences = [list(map(str, row)) for row in table[request.tokens_column]]
    bad = next((i for i, row in enumerate(sentences) if not row), None)
    if bad is not None:
        raise BertJaxError(f"{request.input}: row {bad + 1}: column {request.tokens_column!r} "
                           f"has no words")
    return sentences


def _predict(request: PredictRequest, config, params, tok, warn) -> str:
    """A tag per word, as CoNLL lines (word, tag) or jsonl (tokens, tags) by the extension."""
    from bert_jax import inference
    atomic.check_output_file(request.output, (".jsonl",) + CONLL_TYPES, request.input)
    inference.require_architecture(config, params, TASK.architecture, request.model)
    sentences = _read_sentences(request)
    length, warnings = inference.clamp_length(config, request.max_seq_length or 128)
    warn(warnings)
    tags = tag_words(config, params, tok, sentences, length, request.batch_size)
    jsonl = os.path.splitext(request.output)[1].lower() == ".jsonl"
    with atomic.atomic_file(request.output) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for words, row in zip(sentences, tags):
            if jsonl:
                f.write(json.dumps({"tokens": words, "tags": row}, ensure_ascii=False) + "\n")
            else:
                f.write("".join(f"{w}\t{t}\n" for w, t in zip(words, row)) + "\n")
    return f"wrote {sum(map(len, tags))} tags for {len(tags)} sentences to {request.output}"


TASK = Task(
    name="token-classification", architecture="BertForTokenClassification", loss=loss,
    load=load, metrics=("f1", "accuracy", "precision", "recall"),  # f1: chunk tags only
    headline=("accuracy", "precision", "recall", "f1"), summary=summary,
    about="CoNLL text or tokens/tags lists",
    predict=Predictor(_predict, (".jsonl",) + CONLL_TYPES,
                      "CoNLL text (a word per line, first column) or jsonl with a list of words "
                      "per row; writes a tag per word, as CoNLL lines (word, tag) or jsonl "
                      "(tokens, tags) by the output's extension"))
