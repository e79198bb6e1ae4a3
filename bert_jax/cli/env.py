"""`bert-jax env`: the versions, devices and machine to paste into a bug report."""

from __future__ import annotations

import json

from bert_jax.cli import flags


def add_parsers(sub) -> None:
    p = sub.add_parser("env", help="versions, devices, CPU (model, AVX/AMX flags), cores and "
                                   "memory: paste it into a bug report",
                       description="The record the bench scripts write beside every figure "
                                   "(bert_jax/runtime/environment.py).")
    flags.add_common(p)
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    p.set_defaults(run=show)


def show(args) -> int:
    from bert_jax.runtime import environment
    env = environment.record()
    print(json.dumps(env, indent=2) if args.json else "\n".join(environment.lines(env)))
    return 0
