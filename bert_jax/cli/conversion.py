"""`bert-jax convert` and `bert-jax parity`: moving model directories between frameworks, and
checking that ours computes what transformers does."""

from __future__ import annotations

import os

from bert_jax.cli import flags
from bert_jax.errors import BertJaxError


def add_parsers(sub) -> None:
    p = sub.add_parser("convert", help="Hugging Face BERT dir ↔ bert_jax model dir")
    flags.add_common(p)
    p.add_argument("src", help="source directory or a Hub id org/name[@revision]")
    p.add_argument("dst", help="destination directory (created atomically)")
    p.add_argument("--to", choices=("flax", "hf"), default="flax",
                   help="flax: HF dir → our model dir (default); hf: our dir → HF dir")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty destination")
    p.set_defaults(run=convert)

    p = sub.add_parser("parity", help="compare ours with transformers on one checkpoint")
    flags.add_common(p)
    p.add_argument("hf_dir", help="Hugging Face BERT directory or a Hub id org/name[@revision]")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--batch-size", type=int, default=3)
    p.add_argument("--seq-len", type=int, default=13)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=parity)


def convert(args) -> None:
    import jax

    from bert_jax.model_files import atomic, hub, huggingface, model_dir, paths
    from bert_jax.models.task_models import architecture_of
    args.src = hub.local_model(args.src)  # a Hub id: its snapshot (a local path wins)
    atomic.check_writable_dir(args.dst, args.overwrite)  # before the conversion, not after it
    src, dst = os.path.realpath(args.src), os.path.realpath(args.dst)
    if dst == src or src.startswith(dst + os.sep):  # replacing dst would delete the source
        raise BertJaxError(f"{args.dst}: the destination is the source directory (or holds it)")
    if args.to == "flax":
        if paths.kind(args.src) == paths.MODEL_DIR:
            raise BertJaxError(f"{args.src}: already a bert_jax model directory (use --to hf)")
        config, params = huggingface.load_hf(args.src)
        name = huggingface.named_architecture(args.src)
        model_dir.save_model_dir(args.dst, config, params, paths.vocab_files(args.src),
                                 overwrite=args.overwrite, architecture=name)
    else:
        config, params = model_dir.load_pretrained(args.src)
        name = huggingface.named_architecture(paths.model_path(args.src))
        huggingface.save_hf(args.dst, config, params, paths.vocab_files(args.src),
                            overwrite=args.overwrite, architecture=name)
    count = sum(v.size for v in jax.tree.leaves(params))
    written = architecture_of(params, config, huggingface.named_architecture(args.dst))
    print(f"wrote {written} ({config.num_hidden_layers} layers, "
          f"hidden {config.hidden_size}, {count:,} parameters) to {args.dst} "
          f"[{'Hugging Face' if args.to == 'hf' else 'bert_jax'} format]")


def parity(args) -> None:
    from bert_jax.model_files import hub, parity as parity_report
    from bert_jax.models.config import BertConfig
    for flag, value, minimum in (("--batch-size", args.batch_size, 1),
                                 ("--seq-len", args.seq_len, 2)):
        if value < minimum:
            raise BertJaxError(f"{flag}: expected an integer ≥ {minimum}, got {value}")
    args.hf_dir = hub.local_model(args.hf_dir)  # a Hub id: its snapshot (a local path wins)
    config_json = os.path.join(args.hf_dir, "config.json")
    if os.path.isfile(config_json):  # before torch and the model are loaded
        positions = BertConfig.from_json_file(config_json).max_position_embeddings
        if args.seq_len > positions:
            raise BertJaxError(f"--seq-len: {args.seq_len} is more than the model's "
                               f"max_position_embeddings ({positions})")
    report = parity_report.compare(args.hf_dir, args.dtype, args.batch_size, args.seq_len,
                                   args.seed)
    print(f"ours ({args.dtype}) vs transformers (float32) on {args.batch_size}×{args.seq_len} "
          f"tokens with padding and two segments:")
    for name, value in report.items():
        kind = "agreement" if name.endswith("agreement") else "max |Δ|"
        print(f"  {name:<30} {kind:>9}  {value:.3g}")
