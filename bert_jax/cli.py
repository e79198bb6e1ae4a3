"""`bert-jax` console script: one subcommand per job; bad input is one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys

from bert_jax.errors import BertJaxError


def _convert(args) -> None:
    import jax

    from bert_jax import convert, fileio, pretrained
    fileio.check_writable_dir(args.dst, args.overwrite)  # before the conversion, not after it
    src, dst = os.path.realpath(args.src), os.path.realpath(args.dst)
    if dst == src or src.startswith(dst + os.sep):  # replacing dst would delete the source
        raise BertJaxError(f"{args.dst}: the destination is the source directory (or holds it)")
    if args.to == "flax":
        if pretrained.is_model_dir(args.src):
            raise BertJaxError(f"{args.src}: already a bert_jax model directory (use --to hf)")
        config, params = convert.load_hf(args.src)
        pretrained.save_model_dir(args.dst, config, params, convert.vocab_files_in(args.src),
                                  overwrite=args.overwrite)
    else:
        config, params = pretrained.load_pretrained(args.src)
        convert.save_hf(args.dst, config, params, convert.vocab_files_in(args.src),
                        overwrite=args.overwrite)
    count = sum(v.size for v in jax.tree.leaves(params))
    print(f"wrote {pretrained.architecture_of(params)} ({config.num_hidden_layers} layers, "
          f"hidden {config.hidden_size}, {count:,} parameters) to {args.dst} "
          f"[{'Hugging Face' if args.to == 'hf' else 'bert_jax'} format]")


def _parity(args) -> None:
    from bert_jax import parity
    from bert_jax.config import BertConfig
    _at_least("--batch-size", args.batch_size, 1)
    _at_least("--seq-len", args.seq_len, 2)
    config_json = os.path.join(args.hf_dir, "config.json")
    if os.path.isfile(config_json):  # before torch and the model are loaded
        positions = BertConfig.from_json_file(config_json).max_position_embeddings
        if args.seq_len > positions:
            raise BertJaxError(f"--seq-len: {args.seq_len} is more than the model's "
                               f"max_position_embeddings ({positions})")
    report = parity.compare(args.hf_dir, args.dtype, args.batch_size, args.seq_len, args.seed)
    print(f"ours ({args.dtype}) vs transformers (float32) on {args.batch_size}×{args.seq_len} "
          f"tokens with padding and two segments:")
    for name, value in report.items():
        kind = "agreement" if name.endswith("agreement") else "max |Δ|"
        print(f"  {name:<30} {kind:>9}  {value:.3g}")


def _at_least(flag: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise BertJaxError(f"{flag}: expected an integer ≥ {minimum}, got {value}")


@contextlib.contextmanager
def _removed_on_bad_input(workdir: str):
    """A workdir this command creates is removed again if bad input stops the job before its
    first checkpoint: a refused run leaves nothing half-written behind."""
    new = not os.path.exists(workdir)
    try:
        yield
    except (BertJaxError, OSError):
        from bert_jax.checkpoint import latest_complete_step
        if new and os.path.isdir(workdir) and latest_complete_step(workdir) is None:
            import jax
            if jax.process_index() == 0:
                shutil.rmtree(workdir, ignore_errors=True)
        raise


def _run_job(command: str, job):
    """(job(), None) with INFO logs printed above the progress bar; (None, 128 + signum) when
    SIGTERM / SIGINT stopped it after saving a checkpoint."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    from bert_jax import loop
    logging.getLogger("bert_jax").setLevel(logging.INFO)
    try:
        with logging_redirect_tqdm():
            return job(), None
    except loop.Interrupted as e:
        print(f"bert-jax {command}: {e}", file=sys.stderr)
        return None, 128 + e.signum


def _pretrain(args) -> int:
    from bert_jax import sharding, train_config, trainer
    sharding.initialize_distributed(args.coordinator_address, args.num_processes,
                                    args.process_id, args.initialization_timeout)
    cfg = train_config.load_config(args.config, args.overrides)
    name = os.path.splitext(os.path.basename(args.config))[0].removeprefix("pretrain_")
    workdir = args.workdir or os.path.join("runs", name)
    with _removed_on_bad_input(workdir):
        final, code = _run_job("pretrain", lambda: trainer.pretrain(cfg, workdir))
    if code:
        return code
    if final:
        print(f"done: {cfg.steps} steps in {workdir}; held-out MLM accuracy "
              f"{final['mlm_accuracy']:.4f}, NSP accuracy {final['nsp_accuracy']:.4f}, "
              f"perplexity {final['mlm_perplexity']:.2f}; Hugging Face export in "
              f"{os.path.join(workdir, 'export')}")
    return 0


def _finetune(args) -> int:
    from bert_jax import finetune_config, finetuner, sharding
    sharding.initialize_distributed()  # Slurm / TPU pods; a plain run does nothing
    if args.dataset and len(args.dataset) > 2:
        raise BertJaxError(f"--dataset: expected NAME [CONFIG], got {' '.join(args.dataset)}")
    dataset, dataset_config = (list(args.dataset) + [None])[:2] if args.dataset else (None, None)
    cfg = finetune_config.load_config(
        args.config or "", args.overrides, init=args.init, dataset=dataset,
        dataset_config=dataset_config, train_file=args.train,
        validation_file=args.validation, test_file=args.test, text_column=args.text_column,
        text_pair_column=args.text_pair_column, label_column=args.label_column,
        epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        max_seq_length=args.max_seq_length, seed=args.seed, dtype=args.dtype)
    workdir = args.workdir or os.path.join("runs", "finetune")
    with _removed_on_bad_input(workdir):
        result, code = _run_job("finetune", lambda: finetuner.finetune(cfg, workdir))
    if code:
        return code
    for split in ("validation", "test"):
        if split in result:
            r = result[split]
            print(f"{split} ({r['rows']} rows, epoch {result['best_epoch']}): accuracy "
                  f"{r['accuracy']:.4f}, macro-F1 {r['macro_f1']:.4f}, MCC {r['mcc']:.4f}")
    print(f"best model: {os.path.join(workdir, finetuner.MODEL)} (bert_jax), "
          f"{os.path.join(workdir, finetuner.EXPORT)} (Hugging Face); scores in "
          f"{os.path.join(workdir, 'metrics.json')}")
    return 0


def _read_texts(path: str, text_column: str, pair_column: str):
    from bert_jax import classification_data as data
    table = data.read_table(path)
    data.check_columns(table, path, [text_column] + ([pair_column] if pair_column else []))
    texts = data.texts_of(table, text_column, path)
    return table, texts, data.texts_of(table, pair_column, path) if pair_column else None


def _fit_length(args, config, tok, texts, pairs) -> int:
    from bert_jax import inference
    length, warnings = inference.fit_length(config, tok, texts, pairs, args.max_seq_length,
                                            args.batch_size)
    for message in warnings:
        print(f"bert-jax {args.command}: warning: {message}", file=sys.stderr)
    return length


def _predict(args) -> None:
    from bert_jax import fileio, inference
    fileio.check_output_file(args.output, _FRAME_TYPES, args.input)
    config, params, tok = inference.load(args.model, head="classifier")
    table, texts, pairs = _read_texts(args.input, args.text_column, args.text_pair_column)
    length = _fit_length(args, config, tok, texts, pairs)
    probs = inference.predict_proba(config, params, tok, texts, pairs, length, args.batch_size)
    frame = table.to_pandas()
    frame["predicted_label"] = [config.id2label[i] for i in probs.argmax(-1)]
    frame["probability"] = probs.max(-1)
    for i, label in enumerate(config.id2label):
        frame[f"probability_{label}"] = probs[:, i]
    with fileio.atomic_file(args.output) as tmp:
        _write_frame(frame, tmp)
    counts = frame["predicted_label"].value_counts().to_dict()
    print(f"wrote {len(frame)} predictions to {args.output}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


_FRAME_TYPES = (".csv", ".tsv", ".json", ".jsonl", ".parquet")


def _write_frame(frame, path: str) -> None:
    ext = os.path.splitext(path)[1].lower()
    if ext in (".csv", ".tsv"):
        frame.to_csv(path, index=False, sep="\t" if ext == ".tsv" else ",")
    elif ext == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif ext == ".json":
        frame.to_json(path, orient="records", force_ascii=False)
    elif ext == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise BertJaxError(f"{path}: unknown output type {ext or '(none)'}; expected .csv, "
                           f".tsv, .json, .jsonl or .parquet")


def _fill_mask(args) -> None:
    from bert_jax import inference
    config, params, tok = inference.load(args.model, head="predictions")
    candidates_per_mask = inference.fill_mask(config, params, tok, args.text, args.top_k)
    _, warnings = inference.fit_length(config, tok, [args.text], None,
                                       config.max_position_embeddings)
    for message in warnings:
        print(f"bert-jax fill-mask: warning: {message}", file=sys.stderr)
    for i, candidates in enumerate(candidates_per_mask):
        print(f"[MASK] {i + 1}:" if i or args.text.count("[MASK]") > 1 else "[MASK]:")
        for token, p in candidates:
            print(f"  {token:<20} {p:.4f}")


def _embed(args) -> None:
    import numpy as np

    from bert_jax import fileio, inference
    fileio.check_output_file(args.output, (".npy",), args.input)
    config, params, tok = inference.load(args.model)
    _, texts, _ = _read_texts(args.input, args.text_column, "")
    length = _fit_length(args, config, tok, texts, None)
    vectors = inference.embed(config, params, tok, texts, args.pooling, length,
                              args.batch_size, args.normalize)
    with fileio.atomic_file(args.output) as tmp:
        np.save(tmp, vectors)
    print(f"wrote {vectors.shape[0]} × {vectors.shape[1]} {args.pooling}-pooled embeddings to "
          f"{args.output}")


def _tokenizer(args) -> None:
    from bert_jax import tokenizer
    tok = tokenizer.train_tokenizer(args.files, args.vocab_size, args.out,
                                    lowercase=not args.cased, min_frequency=args.min_frequency)
    print(f"wrote a {tok.get_vocab_size(with_added_tokens=True):,}-token WordPiece vocabulary "
          f"({'cased' if args.cased else 'uncased'}) to {args.out}: vocab.txt, tokenizer.json")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse prints the whole usage first); subcommand
    parsers inherit this class."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bert-jax", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("convert", help="Hugging Face BERT dir ↔ bert_jax model dir")
    p.add_argument("src", help="source directory")
    p.add_argument("dst", help="destination directory (created atomically)")
    p.add_argument("--to", choices=("flax", "hf"), default="flax",
                   help="flax: HF dir → our model dir (default); hf: our dir → HF dir")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty destination")
    p.set_defaults(run=_convert)

    p = sub.add_parser("parity", help="compare ours with transformers on one checkpoint")
    p.add_argument("hf_dir", help="Hugging Face BERT directory")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--seq-len", type=int, default=13)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=_parity)

    p = sub.add_parser("pretrain", help="pretrain BERT (MLM + NSP) from raw text",
                       description="Overrides: --config.FIELD=VALUE (see bert_jax/train_config.py)")
    p.add_argument("--config", default="configs/pretrain_tiny.py", help="Python config file")
    p.add_argument("--workdir", default=None, help="run directory (default runs/<config name>)")
    p.add_argument("--coordinator_address", default=None,
                   help="multi-host: host:port of process 0 (jax.distributed)")
    p.add_argument("--num_processes", type=int, default=None)
    p.add_argument("--process_id", type=int, default=None)
    p.add_argument("--initialization_timeout", type=int, default=300,
                   help="seconds to wait for the other processes")
    p.set_defaults(run=_pretrain)

    p = sub.add_parser("finetune", help="fine-tune a pretrained BERT for text classification",
                       description="Flags override the --config file; --config.FIELD=VALUE any "
                                   "field (see bert_jax/finetune_config.py)")
    p.add_argument("--config", default=None, help="Python config file (configs/finetune_*.py)")
    p.add_argument("--init", default=None,
                   help="our model dir, a pretraining workdir or a Hugging Face BERT dir")
    p.add_argument("--dataset", nargs="+", metavar=("NAME", "CONFIG"), default=None,
                   help="a `datasets` hub dataset and its configuration, e.g. glue sst2")
    p.add_argument("--train", default=None, help="csv / tsv / json / jsonl / parquet file")
    p.add_argument("--validation", default=None, help="scored every epoch; picks the best")
    p.add_argument("--test", default=None, help="scored once with the best model")
    p.add_argument("--text-column", default=None)
    p.add_argument("--text-pair-column", default=None, help="second text of sentence pairs")
    p.add_argument("--label-column", default=None)
    p.add_argument("--workdir", default=None, help="run directory (default runs/finetune)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--max-seq-length", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None)
    p.set_defaults(run=_finetune)

    p = sub.add_parser("predict", help="class probabilities per row of a file")
    p.add_argument("model", help="fine-tuned model dir (ours or Hugging Face) or finetune workdir")
    p.add_argument("--input", required=True, help="csv / tsv / json / jsonl / parquet / txt")
    p.add_argument("--output", required=True, help="csv / tsv / json / jsonl / parquet")
    p.add_argument("--text-column", default="text")
    p.add_argument("--text-pair-column", default="")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=_predict)

    p = sub.add_parser("fill-mask", help="top-k tokens for each [MASK] in a text")
    p.add_argument("model", help="a model with an MLM head (BertForPreTraining / MaskedLM)")
    p.add_argument("text", help='e.g. "the capital of france is [MASK]."')
    p.add_argument("--top-k", type=int, default=5)
    p.set_defaults(run=_fill_mask)

    p = sub.add_parser("embed", help="one vector per text, saved as .npy")
    p.add_argument("model", help="any BERT model directory")
    p.add_argument("--input", required=True, help="txt (one text a line), csv, jsonl, …")
    p.add_argument("--output", required=True, help="FILE.npy: (rows, hidden) float32")
    p.add_argument("--pooling", choices=("cls", "mean"), default="cls")
    p.add_argument("--normalize", action="store_true", help="unit-length vectors")
    p.add_argument("--text-column", default="text")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=_embed)

    p = sub.add_parser("tokenizer", help="train a WordPiece vocabulary from text files")
    p.add_argument("--files", required=True, help="glob of UTF-8 text files (quote it)")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--out", required=True, help="directory for vocab.txt and tokenizer.json")
    p.add_argument("--cased", action="store_true", help="keep case and accents")
    p.add_argument("--min-frequency", type=int, default=2)
    p.set_defaults(run=_tokenizer)
    return parser


def _use_compilation_cache() -> None:
    """Keep XLA executables across runs in .cache/bert_jax/xla (BERT_JAX_XLA_CACHE moves it,
    "" turns it off): a resumed or repeated job skips the compile (tiny pretraining step,
    measured: 9.6 s cold, 1.6 s warm). Only compiles over a second are kept."""
    path = os.environ.get("BERT_JAX_XLA_CACHE", os.path.join(".cache", "bert_jax", "xla"))
    if path:
        import jax
        jax.config.update("jax_compilation_cache_dir", os.path.abspath(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _quiet_background_errors() -> None:
    """Orbax's writer threads log a failed save's traceback, asyncio logs the same error as
    "never retrieved", and tensorstore callbacks racing a closed event loop print one; the
    failure reaches the foreground, which reports it in one line. Without --debug, keep those
    background tracebacks (not warnings) off stderr."""
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_below_error)  # adding it again is a no-op
    sys.unraisablehook = _log_unraisable


def _below_error(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR


def _log_unraisable(unraisable) -> None:
    logging.getLogger("bert_jax").debug("ignored in a background thread: %r",
                                        unraisable.exc_value)


def main(argv=None) -> int:
    from bert_jax.train_config import split_overrides
    argv, overrides = split_overrides(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # a usage error, already printed in one line, or --help
        return e.code
    args.overrides = overrides
    if overrides and args.command not in ("pretrain", "finetune"):
        print(f"bert-jax {args.command}: error: --config.{overrides[0]} is only for pretrain "
              f"and finetune",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.debug:
        _quiet_background_errors()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        _use_compilation_cache()
        code = args.run(args)
    except (BertJaxError, OSError) as e:
        if args.debug:
            raise
        print(f"bert-jax {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bert-jax {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, or bad input nothing checked yet: still one line
        if args.debug:
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"bert-jax {args.command}: error: unexpected {type(e).__name__}: {first} (run "
              f"with --debug for the traceback)", file=sys.stderr)
        return 1
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
