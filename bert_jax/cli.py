"""`bert-jax` console script: one subcommand per job; bad input is one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from bert_jax.errors import BertJaxError


def _convert(args) -> None:
    import jax

    from bert_jax import convert, pretrained
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
    report = parity.compare(args.hf_dir, args.dtype, args.batch_size, args.seq_len, args.seed)
    print(f"ours ({args.dtype}) vs transformers (float32) on {args.batch_size}×{args.seq_len} "
          f"tokens with padding and two segments:")
    for name, value in report.items():
        kind = "agreement" if name.endswith("agreement") else "max |Δ|"
        print(f"  {name:<30} {kind:>9}  {value:.3g}")


def _pretrain(args) -> int:
    from tqdm.contrib.logging import logging_redirect_tqdm

    from bert_jax import sharding, train_config, trainer
    sharding.initialize_distributed(args.coordinator_address, args.num_processes,
                                    args.process_id, args.initialization_timeout)
    cfg = train_config.load_config(args.config, args.overrides)
    name = os.path.splitext(os.path.basename(args.config))[0].removeprefix("pretrain_")
    workdir = args.workdir or os.path.join("runs", name)
    logging.getLogger("bert_jax").setLevel(logging.INFO)
    try:
        with logging_redirect_tqdm():
            final = trainer.pretrain(cfg, workdir)
    except trainer.Interrupted as e:
        print(f"bert-jax pretrain: {e}", file=sys.stderr)
        return 128 + e.signum
    if final:
        print(f"done: {cfg.steps} steps in {workdir}; held-out MLM accuracy "
              f"{final['mlm_accuracy']:.4f}, NSP accuracy {final['nsp_accuracy']:.4f}, "
              f"perplexity {final['mlm_perplexity']:.2f}; Hugging Face export in "
              f"{os.path.join(workdir, 'export')}")
    return 0


def _tokenizer(args) -> None:
    from bert_jax import tokenizer
    tok = tokenizer.train_tokenizer(args.files, args.vocab_size, args.out,
                                    lowercase=not args.cased, min_frequency=args.min_frequency)
    print(f"wrote a {tok.get_vocab_size(with_added_tokens=True):,}-token WordPiece vocabulary "
          f"({'cased' if args.cased else 'uncased'}) to {args.out}: vocab.txt, tokenizer.json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bert-jax", description=__doc__)
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

    p = sub.add_parser("tokenizer", help="train a WordPiece vocabulary from text files")
    p.add_argument("--files", required=True, help="glob of UTF-8 text files (quote it)")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--out", required=True, help="directory for vocab.txt and tokenizer.json")
    p.add_argument("--cased", action="store_true", help="keep case and accents")
    p.add_argument("--min-frequency", type=int, default=2)
    p.set_defaults(run=_tokenizer)
    return parser


def main(argv=None) -> int:
    from bert_jax.train_config import split_overrides
    argv, overrides = split_overrides(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.overrides = overrides
    if overrides and args.command != "pretrain":
        print(f"bert-jax {args.command}: error: --config.{overrides[0]} is only for pretrain",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        code = args.run(args)
    except (BertJaxError, OSError) as e:
        if args.debug:
            raise
        print(f"bert-jax {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bert-jax {args.command}: interrupted", file=sys.stderr)
        return 130
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
