"""`bert-jax tokenizer`: train a WordPiece vocabulary from text files."""

from __future__ import annotations

from bert_jax.cli import flags


def add_parsers(sub) -> None:
    p = sub.add_parser("tokenizer", help="train a WordPiece vocabulary from text files")
    flags.add_common(p)
    p.add_argument("--files", required=True, help="glob of UTF-8 text files (quote it)")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--out", required=True, help="directory for vocab.txt and tokenizer.json")
    p.add_argument("--cased", action="store_true", help="keep case and accents")
    p.add_argument("--min-frequency", type=int, default=2)
    p.set_defaults(run=train_vocabulary)


def train_vocabulary(args) -> None:
    from bert_jax.data import tokenizer
    tok = tokenizer.train_tokenizer(args.files, args.vocab_size, args.out,
                                    lowercase=not args.cased, min_frequency=args.min_frequency)
    print(f"wrote a {tok.get_vocab_size(with_added_tokens=True):,}-token WordPiece vocabulary "
          f"({'cased' if args.cased else 'uncased'}) to {args.out}: vocab.txt, tokenizer.json")
