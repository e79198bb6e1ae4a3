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
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        args.run(args)
    except (BertJaxError, OSError) as e:
        if args.debug:
            raise
        print(f"bert-jax {args.command}: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bert-jax {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
