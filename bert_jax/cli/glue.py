"""`bert-jax glue`: the paper's GLUE protocol (glue/job.py), a line per run, the table at
the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys

from bert_jax.cli import flags
from bert_jax.errors import BertJaxError

PAPER_RATES = "5e-5,4e-5,3e-5,2e-5"


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "glue", help="GLUE with the BERT paper's protocol: a learning-rate grid per task, the "
                     "best on dev, the table and the test server's files",
        description="Per task, fine-tune at each learning rate (and seed), keep the best run on "
                    "dev by the task's official score, predict the test sets with it. WORKDIR "
                    "gets results.md, results.json and submission/; rerunning the command skips "
                    "finished runs and resumes a killed one.")
    flags.add_common(p)
    p.add_argument("--init", required=True,
                   help="our model dir, a pretraining workdir, a Hugging Face BERT dir or a Hub "
                        "id org/name[@revision]")
    p.add_argument("--workdir", required=True, help="where the runs, the table and the "
                                                    "submission files go")
    p.add_argument("--data-dir", default="",
                   help="a folder in the GLUE download's layout (CoLA/, SST-2/, …, MNLI/, "
                        "diagnostic/); default: the hub's nyu-mll/glue")
    p.add_argument("--hub-dataset", default=None,
                   help="a hub dataset in nyu-mll/glue's layout (default nyu-mll/glue; "
                        "NAME@REVISION pins a revision)")
    p.add_argument("--tasks", default="", help="comma-separated, e.g. rte,mrpc,sts-b (default: "
                                               "all nine)")
    p.add_argument("--learning-rates", default=PAPER_RATES,
                   help=f"comma-separated grid (default the paper's {PAPER_RATES})")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, a run each (default 0)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--max-train-examples", type=int, default=0,
                   help="at most this many training rows per task, a fixed random subset "
                        "(default 0: all)")
    p.set_defaults(run=glue)


def _numbers(text: str, kind, flag: str) -> tuple:
    try:
        values = tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise BertJaxError(f"{flag}: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise BertJaxError(f"{flag}: expected comma-separated numbers, got {text!r}")
    return values


@contextlib.contextmanager
def _removed_before_any_run(workdir: str):
    """A workdir this command creates is removed again when bad input stops it before its
    first run starts (refused data leaves nothing behind); later, runs are kept."""
    from bert_jax.model_files import paths
    new = not os.path.exists(workdir)
    try:
        yield
    except (BertJaxError, OSError):
        if new and not os.path.isdir(os.path.join(workdir, paths.GLUE_RUNS)):
            shutil.rmtree(workdir, ignore_errors=True)
        raise


def glue(args) -> int:
    from bert_jax.runtime import workdir_lock
    from bert_jax.glue.benchmark import HUB
    from bert_jax.training import loop
    from bert_jax.glue.job import GlueSettings
    from bert_jax.glue.job import glue as run_glue
    settings = GlueSettings(
        init_from=args.init, data_dir=args.data_dir, hub=args.hub_dataset or HUB, tasks=args.tasks,
        learning_rates=_numbers(args.learning_rates, float, "--learning-rates"),
        seeds=_numbers(args.seeds, int, "--seeds"), epochs=args.epochs,
        batch_size=args.batch_size, max_seq_length=args.max_seq_length,
        eval_batch_size=args.eval_batch_size, max_train_examples=args.max_train_examples)
    for name in ("epochs", "batch_size", "max_seq_length", "eval_batch_size"):
        if getattr(settings, name) < 1:
            raise BertJaxError(f"--{name.replace('_', '-')}: expected an integer ≥ 1, got "
                               f"{getattr(settings, name)}")
    if settings.data_dir and not os.path.isdir(settings.data_dir):
        raise BertJaxError(f"{settings.data_dir}: no such folder (--data-dir: a folder in the "
                           f"GLUE download's layout)")
    say = lambda line: print(f"glue {line}", flush=True)  # noqa: E731
    try:
        with _removed_before_any_run(args.workdir), workdir_lock.hold(args.workdir):
            results = run_glue(settings, args.workdir, say)
    except loop.Interrupted as e:
        print(f"bert-jax glue: {e}", file=sys.stderr)
        return 128 + e.signum
    from bert_jax.glue import benchmark, markdown_table
    chosen = [benchmark.BENCHMARK[name] for name in results["tasks"]]
    best = {t.name: results["tasks"][t.name]["best"]["scores"] for t in chosen}
    print(" | ".join(f"{t.name} {markdown_table.cell(t, best[t.name])}" for t in chosen)
          + f" | average {100 * results['average']:.1f}")
    print(f"table in {os.path.join(args.workdir, 'results.md')}, test predictions in "
          f"{os.path.join(args.workdir, 'submission')}")
    return 0
