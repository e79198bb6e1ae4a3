"""`bert-jax pretrain` and `bert-jax finetune`: the training jobs, one line of result each."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys

from bert_jax import resources
from bert_jax.cli import flags
from bert_jax.data import hub_datasets
from bert_jax.errors import BertJaxError
from bert_jax.tasks import DEFAULT, TASKS  # imports no JAX or datasets: --help stays fast


def add_parsers(sub) -> None:
    p = sub.add_parser("pretrain", help="pretrain BERT (MLM + NSP) from raw text",
                       description="Overrides: --config.FIELD=VALUE (see "
                                   "bert_jax/training/pretrain_config.py)")
    flags.add_common(p)
    p.add_argument("--config", default=None,
                   help="a bundled config's name (tiny, base, base_phase2, or a file stem such as "
                        "pretrain_tiny) or a Python config file; default tiny")
    p.add_argument("--workdir", default=None, help="run directory (default runs/<config name>)")
    flags.add_multihost(p)
    p.set_defaults(run=pretrain)

    p = sub.add_parser(
        "prepare", help="prepare pretraining data (tokenised sentences) in shards",
        description="Streams the config's train_files (text, .gz, jsonl, parquet) or "
                    "train_dataset into DIR with bounded memory. Job I of N takes sources I, "
                    "I+N, …: run the N jobs anywhere (a Slurm array, GNU parallel); the last to "
                    "finish writes DIR/manifest.json, then pretrain with "
                    "--config.train_files=DIR. Overrides: --config.FIELD=VALUE.")
    flags.add_common(p)
    p.add_argument("--config", default=None,
                   help="a bundled config's name (tiny, base, base_phase2, or a file stem such as "
                        "pretrain_tiny) or a Python config file; default tiny")
    p.add_argument("--out", required=True, help="the prepared set's directory")
    p.add_argument("--shard", type=int, default=0, help="this job's shard, 0 … N-1")
    p.add_argument("--num-shards", type=int, default=1, help="N, the number of jobs")
    p.add_argument("--workers", type=int, default=None,
                   help="tokenising processes (default config.prepare_workers; 0 = here)")
    p.set_defaults(run=prepare)

    p = sub.add_parser(
        "finetune", help="fine-tune a pretrained BERT: classification, question answering, "
                         "token classification, multiple choice",
        description="Flags override the --config file; --config.FIELD=VALUE any field (see "
                    "bert_jax/training/finetune_config.py)")
    flags.add_common(p)
    p.add_argument("--config", default=None,
                   help="a bundled config's name (finetune_fine_foods, finetune_squad, …) or a "
                        "Python config file")
    p.add_argument("--task", default=None, choices=tuple(TASKS),
                   help=f"default {DEFAULT}; " + "; ".join(
                       f"{name}: {task.about}" for name, task in TASKS.items()))
    p.add_argument("--init", default=None,
                   help="our model dir, a pretraining workdir, a Hugging Face BERT dir or a Hub "
                        "id org/name[@revision]")
    p.add_argument("--dataset", nargs="+", metavar=("NAME", "CONFIG"), default=None,
                   help="a `datasets` hub dataset and its configuration, e.g. glue sst2; "
                        "NAME@REVISION pins a revision (nyu-mll/glue@<commit> sst2)")
    p.add_argument("--train", default=None, help="csv / tsv / json / jsonl / parquet file")
    p.add_argument("--validation", default=None, help="scored every epoch; picks the best")
    p.add_argument("--test", default=None, help="scored once with the best model")
    p.add_argument("--text-column", default=None)
    p.add_argument("--text-pair-column", default=None, help="second text of sentence pairs")
    p.add_argument("--label-column", default=None)
    p.add_argument("--tokens-column", default=None, help="token classification: list of words")
    p.add_argument("--tags-column", default=None, help="token classification: list of tags")
    p.add_argument("--workdir", default=None,
                   help="run directory (default runs/<config name>, or without --config "
                        "runs/<task>-<dataset, or the training file's folder>)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--max-seq-length", type=int, default=None)
    p.add_argument("--doc-stride", type=int, default=None,
                   help="question answering: tokens of context shared by consecutive windows "
                        "(Hugging Face's meaning; the original run_squad's doc_stride is the step "
                        "between window starts instead); default 128")
    p.add_argument("--max-answer-length", type=int, default=None,
                   help="question answering: longest answer in tokens (default 30)")
    p.add_argument("--version-2-with-negative", action="store_true", default=None,
                   help="question answering: SQuAD 2.0, questions may have no answer (also "
                        "on when the data has such questions)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None)
    flags.add_multihost(p)
    p.set_defaults(run=finetune)


@contextlib.contextmanager
def _removed_on_bad_input(workdir: str, new: bool):
    """Yields `started`, which the job calls once its inputs are checked and training begins.
    A `new` workdir (this command creates it) is removed again if bad input stops the job before
    that: a refused run leaves nothing half-written behind. A failure after it (a NaN stop, a
    full disk at the first save) keeps the workdir: its logs and vocabulary say what happened."""
    began = []
    try:
        yield lambda: began.append(True)
    except (BertJaxError, OSError):
        if new and not began and os.path.isdir(workdir):
            import jax
            if jax.process_index() == 0:
                shutil.rmtree(workdir, ignore_errors=True)
        raise


@contextlib.contextmanager
def _joined_with_workdir_locked(workdir: str, args):
    """Joins the multi-process run (if any) holding `workdir`'s lock in process 0, from before
    the heavy imports where process 0 is known from the flags (or is the only process), else
    from when cluster detection names it: a second run on a busy workdir is refused at once."""
    from bert_jax.runtime import workdir_lock
    # the cluster runs whose process ids JAX detects (runtime/sharding.initialize_distributed)
    detected = args.process_id is None and (int(os.environ.get("SLURM_NTASKS", "1")) > 1
                                            or "TPU_WORKER_HOSTNAMES" in os.environ)
    with contextlib.ExitStack() as held:
        if not detected and not args.process_id:
            held.enter_context(workdir_lock.hold(workdir))
        flags.initialize_distributed(args)
        if detected:
            import jax
            if jax.process_index() == 0:
                held.enter_context(workdir_lock.hold(workdir))
        yield


def _run_job(command: str, job):
    """(job(), None) with INFO logs printed above the progress bar; (None, 128 + signum) when
    SIGTERM / SIGINT stopped it after saving a checkpoint."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    from bert_jax.training import loop
    logging.getLogger("bert_jax").setLevel(logging.INFO)
    try:
        with logging_redirect_tqdm():
            return job(), None
    except loop.Interrupted as e:
        print(f"bert-jax {command}: {e}", file=sys.stderr)
        return None, 128 + e.signum


def pretrain(args) -> int:
    config = config_file(args.config, "pretrain_tiny")  # light: before the lock's imports
    name = os.path.splitext(os.path.basename(config))[0].removeprefix("pretrain_")
    workdir = args.workdir or os.path.join("runs", name)
    new = not os.path.exists(workdir)
    with _joined_with_workdir_locked(workdir, args):
        from bert_jax.training import pretrain_config
        from bert_jax.training.pretrain import pretrain as run_pretraining
        from bert_jax.training.pretrain import summary
        cfg = pretrain_config.load_config(config, args.overrides)
        with _removed_on_bad_input(workdir, new) as started:
            result, code = _run_job("pretrain", lambda: run_pretraining(cfg, workdir,
                                                                        on_start=started))
    if code:
        return code
    if result.metrics:
        print(f"done: {result.steps} steps in {workdir}; held-out {summary(result.metrics)}; "
              f"Hugging Face export in {result.export}")
    return 0


def prepare(args) -> int:
    from bert_jax.data import tokenizer
    from bert_jax.training import pretrain_config, pretrain_corpus
    cfg = pretrain_config.load_config(config_file(args.config, "pretrain_tiny"), args.overrides)
    if args.workers is not None:
        cfg = cfg.replace(prepare_workers=args.workers)
    if not cfg.vocab:
        raise BertJaxError("config.vocab: prepare needs the run's vocabulary (vocab.txt or "
                           "tokenizer.json); train one with `bert-jax tokenizer`")
    logging.getLogger("bert_jax").setLevel(logging.INFO)
    manifest = pretrain_corpus.prepare_shard(cfg, tokenizer.load(cfg.vocab), args.out,
                                           args.shard, args.num_shards)
    if manifest is None:
        print(f"shard {args.shard} of {args.num_shards} prepared in {args.out}; the set is "
              f"complete when every shard is")
    else:
        print(f"prepared set complete: {args.out} ({manifest['documents']:,} documents, "
              f"{manifest['sentences']:,} sentences, {manifest['tokens']:,} tokens in "
              f"{manifest['num_shards']} shard(s)); pretrain with "
              f"--config.train_files={args.out}")
    return 0


def finetune(args) -> int:
    from bert_jax.model_files import paths
    from bert_jax.training import finetune_config
    flags.check_multihost(args)
    if args.dataset and len(args.dataset) > 2:
        raise BertJaxError(f"--dataset: expected NAME [CONFIG], got {' '.join(args.dataset)}")
    dataset, dataset_config = (list(args.dataset) + [None])[:2] if args.dataset else (None, None)
    config = config_file(args.config, "")
    cfg = finetune_config.load_config(
        config, args.overrides, init_from=args.init, dataset=dataset,
        dataset_config=dataset_config, train_file=args.train,
        validation_file=args.validation, test_file=args.test, text_column=args.text_column,
        text_pair_column=args.text_pair_column, label_column=args.label_column,
        epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        max_seq_length=args.max_seq_length, seed=args.seed, dtype=args.dtype, task=args.task,
        tokens_column=args.tokens_column, tags_column=args.tags_column,
        doc_stride=args.doc_stride, max_answer_length=args.max_answer_length,
        version_2_with_negative=args.version_2_with_negative)
    workdir = args.workdir or finetune_workdir(cfg, config)
    new = not os.path.exists(workdir)
    with _joined_with_workdir_locked(workdir, args), _removed_on_bad_input(
            workdir, new) as started:
        from bert_jax.training.finetune import finetune as run_finetuning
        result, code = _run_job("finetune", lambda: run_finetuning(cfg, workdir,
                                                                    on_start=started))
    if code:
        return code
    task, scores = TASKS[cfg.task], result.metrics
    for split in ("validation", "test"):
        if split in scores:
            print(f"{split} (epoch {scores['best_epoch']}): {task.summary(scores[split])}")
    extra = (f", predictions in {os.path.join(workdir, task.predictions_file)}"
             if task.predictions_file else "")
    print(f"best model: {result.model} (bert_jax), {result.export} (Hugging Face); scores in "
          f"{os.path.join(workdir, paths.RESULT)}{extra}")
    return 0


def config_file(given, default: str) -> str:
    """The config file of --config (a path, or a bundled config's name or alias), or the bundled
    `default` when none is given: never a file of the current directory that was not named."""
    if given is None:
        return os.path.join(resources.CONFIGS, f"{default}.py") if default else ""
    return resources.config_path(given)


def finetune_workdir(cfg, config_path: str = "") -> str:
    """The default workdir of a fine-tuning run, named for it so that two unrelated runs do not
    meet in one folder (and one that does is refused on resume): runs/<config name>, else
    runs/<task>-<dataset[-configuration]>, else runs/<task>-<the training file's folder>."""
    if config_path:
        name = os.path.splitext(os.path.basename(config_path))[0].removeprefix("finetune_")
        return os.path.join("runs", name)
    if cfg.dataset:
        name, _ = hub_datasets.split_revision(cfg.dataset)  # a pin does not rename the run
        data = "-".join(filter(None, (name.rstrip("/").split("/")[-1], cfg.dataset_config)))
    else:
        train = os.path.abspath(cfg.train_file)
        data = os.path.basename(os.path.dirname(train)) or os.path.splitext(
            os.path.basename(train))[0]
    return os.path.join("runs", f"{cfg.task}-{data}")

