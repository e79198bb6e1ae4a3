"""`bert-jax predict`, `fill-mask` and `embed`: using a model on files of text."""

from __future__ import annotations

import json
import os
import re
import sys

from bert_jax import tasks  # imports no JAX or datasets: --help stays fast
from bert_jax.cli import flags
from bert_jax.errors import BertJaxError
from bert_jax.tasks import table_files
from bert_jax.tasks.task import PredictRequest


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "predict", help="class probabilities per row, an answer per question or a tag per word",
        description=" ".join(f"{name}: {task.predict.about}."
                             for name, task in tasks.predictable().items()))
    flags.add_common(p)
    p.add_argument("model", help="fine-tuned model dir (ours or Hugging Face), finetune workdir"
                                        " or a Hub id org/name[@revision]")
    p.add_argument("--task", default=None, choices=tuple(tasks.predictable()),
                   help="default: the task the model was fine-tuned for (its architecture)")
    p.add_argument("--input", required=True, help="csv / tsv / json / jsonl / parquet / txt; "
                                                  "CoNLL text for token classification")
    p.add_argument("--output", required=True,
                   help="csv / tsv / json / jsonl / parquet; jsonl for question answering; "
                        "jsonl or CoNLL text (.conll, .txt, …) for token classification")
    p.add_argument("--text-column", default="text")
    p.add_argument("--text-pair-column", default="")
    p.add_argument("--tokens-column", default="tokens", help="token classification: words")
    p.add_argument("--max-seq-length", type=int, default=None,
                   help="default 128; 384 for question answering")
    p.add_argument("--doc-stride", type=int, default=128,
                   help="question answering: tokens shared by consecutive context windows")
    p.add_argument("--max-answer-length", type=int, default=30,
                   help="question answering: in tokens")
    p.add_argument("--version-2-with-negative", action="store_true",
                   help="question answering: answer \"\" when no span beats the null score")
    p.add_argument("--null-score-threshold", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=predict)

    p = sub.add_parser("fill-mask", help="top-k tokens for each [MASK] in a text or a file",
                       description="TEXT: prints the top-k tokens of each [MASK]. --input FILE "
                                   "(txt, one text a line; csv, jsonl, …): writes a jsonl line "
                                   'per row, {"text": …, "masks": [[{"token": …, '
                                   '"probability": …}, …top-k], …a list per [MASK]]}.')
    flags.add_common(p)
    p.add_argument("model", help="a model with an MLM head (BertForPreTraining / MaskedLM): a "
                                        "directory or a Hub id org/name[@revision]")
    p.add_argument("text", nargs="?", default=None,
                   help='e.g. "the capital of france is [MASK]."; or give --input')
    p.add_argument("--input", default=None, help="txt (one text a line), csv, jsonl, …")
    p.add_argument("--output", default=None, help="FILE.jsonl, with --input")
    p.add_argument("--text-column", default="text")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=fill_mask)

    p = sub.add_parser("embed", help="one vector per text (.npy), or per token (.jsonl)")
    flags.add_common(p)
    # "-4,-3,-2,-1" is a value, not an unknown option (argparse takes only "-4" for one)
    p._negative_number_matcher = re.compile(r"^-\.?\d")
    p.add_argument("model", help="any BERT model directory or a Hub id org/name[@revision]")
    p.add_argument("--input", required=True, help="txt (one text a line), csv, jsonl, …")
    p.add_argument("--output", required=True,
                   help="FILE.npy: (rows, hidden × layers) float32; with --pooling none "
                        'FILE.jsonl: a line per row, {"tokens": [...], "vectors": [[...], ...]}')
    p.add_argument("--pooling", choices=("cls", "mean", "none"), default="cls",
                   help="[CLS] vector, mean of the real tokens, or none: every token's vector")
    p.add_argument("--layers", default=None,
                   help="hidden states to concatenate, e.g. -4,-3,-2,-1 (the paper's features): "
                        "0 the embeddings, 1.. each layer, negative from the end; default -1")
    p.add_argument("--normalize", action="store_true", help="unit-length vectors")
    p.add_argument("--text-column", default="text")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=embed)


def _fit_length(args, config, tok, texts, pairs) -> int:
    from bert_jax import inference
    length, warnings = inference.fit_length(config, tok, texts, pairs, args.max_seq_length,
                                            args.batch_size)
    _warn(args.command, warnings)
    return length


def _warn(command: str, warnings) -> None:
    """The library's warnings (naming parameters) as the flags of this command."""
    for message in warnings:
        print(f"bert-jax {command}: warning: {flags.as_flags(command, message)}",
              file=sys.stderr)


def predict(args) -> None:
    """The task of the model (or --task) reads the input and writes its predictions."""
    from bert_jax import inference
    from bert_jax.model_files import atomic, paths
    from bert_jax.models.task_models import architecture_of
    every_type = tuple(dict.fromkeys(
        ext for task in tasks.predictable().values() for ext in task.predict.output_types))
    atomic.check_output_file(args.output, every_type, args.input)
    config, params, tok = inference.load(args.model)
    task = (tasks.TASKS[args.task] if args.task
            else tasks.of_model(architecture_of(params, config), config))
    request = PredictRequest(
        model=paths.model_path(args.model), input=args.input, output=args.output,
        max_seq_length=args.max_seq_length, batch_size=args.batch_size,
        text_column=args.text_column, text_pair_column=args.text_pair_column,
        tokens_column=args.tokens_column, doc_stride=args.doc_stride,
        max_answer_length=args.max_answer_length,
        version_2_with_negative=args.version_2_with_negative,
        null_score_threshold=args.null_score_threshold)
    print(task.predict.run(request, config, params, tok,
                           lambda warnings: _warn(args.command, warnings)))


def fill_mask(args) -> None:
    from bert_jax import inference
    if args.text is not None and args.input is not None:
        raise BertJaxError("give a TEXT or --input FILE, not both")
    if args.text is None and args.input is None:
        raise BertJaxError("give a TEXT, or --input FILE with --output FILE.jsonl")
    if args.input is None:
        if args.output is not None:
            raise BertJaxError("--output: writes the predictions for --input FILE; with a "
                               "TEXT they are printed")
        return _fill_mask_text(args)
    from bert_jax.model_files import atomic
    if args.output is None:
        raise BertJaxError("--output: required with --input (a FILE.jsonl)")
    atomic.check_output_file(args.output, (".jsonl",), args.input)
    config, params, tok = inference.load(args.model, head="predictions")
    _, texts, _ = table_files.read_texts(args.input, args.text_column, "")
    limit = config.max_position_embeddings
    _, warnings = inference.fit_length(config, tok, texts, None, limit, args.batch_size)
    predictions = inference.fill_masks(config, params, tok, texts, args.top_k, args.batch_size,
                                       where=args.input)
    _warn(args.command, warnings)
    with atomic.atomic_file(args.output) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for text, masks in zip(texts, predictions):
            row = {"text": text, "masks": [[{"token": t, "probability": p} for t, p in m]
                                           for m in masks]}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote the top {args.top_k} tokens of {sum(map(len, predictions))} masks in "
          f"{len(texts)} texts to {args.output}")


def _fill_mask_text(args) -> None:
    from bert_jax import inference
    config, params, tok = inference.load(args.model, head="predictions")
    candidates_per_mask = inference.fill_mask(config, params, tok, args.text, args.top_k)
    _, warnings = inference.fit_length(config, tok, [args.text], None,
                                       config.max_position_embeddings)
    _warn(args.command, warnings)
    for i, candidates in enumerate(candidates_per_mask):
        print(f"[MASK] {i + 1}:" if i or args.text.count("[MASK]") > 1 else "[MASK]:")
        for token, p in candidates:
            print(f"  {token:<20} {p:.4f}")


def embed(args) -> None:
    import numpy as np

    from bert_jax import inference
    from bert_jax.model_files import atomic
    per_token = args.pooling == "none"
    ext = os.path.splitext(args.output)[1].lower()
    if per_token and ext != ".jsonl":
        raise BertJaxError(f"{args.output}: --pooling none writes a line of token vectors per "
                           f"text: expected .jsonl, got {ext or '(none)'}")
    atomic.check_output_file(args.output, (".jsonl",) if per_token else (".npy",), args.input)
    layers = _parse_layers(args.layers)
    config, params, tok = inference.load(args.model)
    if layers is not None:
        inference.check_layers(config, layers)
    _, texts, _ = table_files.read_texts(args.input, args.text_column, "")
    length = _fit_length(args, config, tok, texts, None)
    vectors = inference.embed(config, params, tok, texts, args.pooling, length,
                              args.batch_size, args.normalize, layers=layers)
    which = f" of hidden states {args.layers}" if layers is not None else ""
    if per_token:
        tokens = inference.tokens_of(tok, texts, length)
        _write_token_vectors(args.output, tokens, vectors)
        print(f"wrote {sum(map(len, tokens))} token vectors of {vectors[0].shape[1]} for "
              f"{len(tokens)} texts{which} to {args.output}")
        return
    with atomic.atomic_file(args.output) as tmp:
        np.save(tmp, vectors)
    print(f"wrote {vectors.shape[0]} × {vectors.shape[1]} {args.pooling}-pooled embeddings"
          f"{which} to {args.output}")


def _parse_layers(text):
    """"-4,-3,-2,-1" → [-4, -3, -2, -1]; the range and repeats are checked against the model."""
    if text is None:
        return None
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise BertJaxError(f"layers: expected comma-separated integers such as -4,-3,-2,-1, "
                           f"got {text!r}") from None


def _write_token_vectors(path: str, tokens, vectors) -> None:
    """One jsonl line per text, {"tokens": [n], "vectors": [n × F]}, in input order; written
    atomically. Floats are float32 values exactly (float64 text that reads back to them)."""
    from bert_jax.model_files import atomic
    with atomic.atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for words, rows in zip(tokens, vectors):
            f.write(json.dumps({"tokens": words, "vectors": rows.tolist()},
                               ensure_ascii=False) + "\n")
