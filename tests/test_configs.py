"""The shipped configs load and validate; overrides are typed; bad ones are refused by name."""

import glob
import os

import pytest

from bert_jax.errors import BertJaxError
from bert_jax.training.pretrain_config import PretrainConfig, load_config
from bert_jax.training.config_files import apply_overrides

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "configs", "pretrain_*.py"))))
def test_shipped_configs_load(path):
    cfg = load_config(path)
    assert isinstance(cfg, PretrainConfig) and cfg.batch_size % cfg.grad_accum_steps == 0


def test_phase2_builds_on_phase1():
    base = load_config(os.path.join(ROOT, "configs", "pretrain_base.py"))
    phase2 = load_config(os.path.join(ROOT, "configs", "pretrain_base_phase2.py"))
    assert (base.max_seq_length, phase2.max_seq_length) == (128, 512)
    assert phase2.init_from == "runs/base" and phase2.model == base.model == "base"


def test_overrides_are_typed():
    cfg = apply_overrides(PretrainConfig(), ["steps=7", "learning_rate=3e-4", "dtype=bfloat16",
                                             "whole_word_masking=true"])
    assert (cfg.steps, cfg.learning_rate, cfg.dtype, cfg.whole_word_masking) == (
        7, 3e-4, "bfloat16", True)
    with pytest.raises(BertJaxError, match="expected int, got 'seven'"):
        apply_overrides(PretrainConfig(), ["steps=seven"])
    with pytest.raises(BertJaxError, match="did you mean learning_rate"):
        apply_overrides(PretrainConfig(), ["learning_rat=1"])


def test_missing_config_file():
    with pytest.raises(BertJaxError, match="config file not found"):
        load_config("configs/nope.py")


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "configs", "finetune_*.py"))))
def test_shipped_finetune_configs_load(path):
    from bert_jax.training import finetune_config
    cfg = finetune_config.load_config(path, init_from="model", train_file="t", validation_file="v")
    assert cfg.best_metric in finetune_config.TASKS[cfg.task].metrics


def test_squad_recipe_is_the_papers():
    from bert_jax.training import finetune_config
    cfg = finetune_config.load_config(os.path.join(ROOT, "configs", "finetune_squad.py"),
                                      init_from="model", train_file="t", validation_file="v")
    assert (cfg.task, cfg.epochs, cfg.learning_rate, cfg.batch_size, cfg.max_seq_length,
            cfg.doc_stride) == ("question-answering", 2, 3e-5, 32, 384, 128)


def test_cli_tasks_are_the_configs():
    """The config, the CLI and predict read the one table of tasks."""
    from bert_jax import tasks
    from bert_jax.cli import jobs
    from bert_jax.cli.main import build_parser
    from bert_jax.training import finetune_config
    assert jobs.TASKS is finetune_config.TASKS is tasks.TASKS
    commands = build_parser()._subparsers._group_actions[0].choices
    choices = {name: next(a.choices for a in commands[name]._actions if a.dest == "task")
               for name in ("finetune", "predict")}
    assert choices == {"finetune": tuple(tasks.TASKS), "predict": tuple(tasks.predictable())}
    assert tuple(tasks.predictable()) == ("sequence-classification", "regression",
                                          "question-answering", "token-classification")


def test_a_config_file_with_an_old_field_name_is_told_the_new_one(tmp_path):
    """FinetuneConfig.init became init_from: a config file still passing init fails in one
    line at its own line, naming the new field."""
    from bert_jax.training import finetune_config
    path = tmp_path / "old.py"
    path.write_text("from bert_jax.training.finetune_config import FinetuneConfig\n\n\n"
                    "def get_config():\n"
                    "    return FinetuneConfig(init='m', train_file='t', validation_file='v')\n")
    with pytest.raises(BertJaxError) as e:
        finetune_config.load_config(str(path))
    assert str(e.value) == (f"{path}:5: TypeError: FinetuneConfig.__init__() got an unexpected "
                            f"keyword argument 'init'; renamed: did you mean init_from?")
