"""PretrainConfig.validate: a warm-up longer than the run is shortened to it, with a warning;
the objective, data preparation fields and the obsolete dupe_factor."""

import glob
import logging

import pytest

from bert_jax.errors import BertJaxError
from bert_jax.training import pretrain_config
from bert_jax.training.pretrain_config import PretrainConfig


def test_warmup_longer_than_the_run_is_shortened_to_it(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        cfg = pretrain_config.validate(PretrainConfig(steps=2, warmup_steps=100))
    assert (cfg.steps, cfg.warmup_steps) == (2, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "config.warmup_steps: 100 is more than config.steps (2); warming up over all 2 steps"]


def test_a_smoke_run_of_a_shipped_config_loads(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        cfg = pretrain_config.load_config("configs/pretrain_base.py", ["steps=2"])
    assert (cfg.steps, cfg.warmup_steps) == (2, 2) and len(caplog.records) == 1


def test_a_warmup_within_the_run_is_kept_silently(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        for steps, warmup in ((10, 10), (10, 3), (10, 0)):
            cfg = pretrain_config.validate(PretrainConfig(steps=steps, warmup_steps=warmup))
            assert (cfg.steps, cfg.warmup_steps) == (steps, warmup)
    assert caplog.records == []


def test_new_fields_default_to_the_papers_run_on_train_files():
    cfg = pretrain_config.validate(PretrainConfig())
    assert (cfg.objective, cfg.text_field, cfg.train_dataset, cfg.train_dataset_config,
            cfg.train_dataset_split, cfg.prepare_workers, cfg.dupe_factor) == (
        "mlm+nsp", "text", "", "", "train", 0, 1)
    assert pretrain_config.validate(PretrainConfig(objective="mlm")).objective == "mlm"


@pytest.mark.parametrize("changes, message", [
    ({"objective": "nsp"}, "config.objective: expected mlm+nsp, mlm+sop, mlm, got 'nsp'"),
    ({"objective": "MLM"}, "config.objective: expected mlm+nsp, mlm+sop, mlm, got 'MLM'"),
    ({"prepare_workers": -1}, "config.prepare_workers: expected an integer ≥ 0, got -1"),
    ({"prepare_workers": 2.0}, "config.prepare_workers: expected int, got 2.0"),
    ({"text_field": ""}, "config.text_field: expected a non-empty field name, got ''"),
    ({"text_field": None}, "config.text_field: expected str, got None"),
    ({"train_dataset": 3}, "config.train_dataset: expected str, got 3"),
])
def test_bad_new_fields_are_refused_by_name(changes, message):
    with pytest.raises(BertJaxError) as e:
        pretrain_config.validate(PretrainConfig(**changes))
    assert str(e.value) == message


def test_new_fields_parse_from_overrides():
    cfg = pretrain_config.load_config("configs/pretrain_tiny.py", [
        "objective=mlm", "prepare_workers=3", "train_dataset=wikitext",
        "train_dataset_config=wikitext-2-raw-v1", "text_field=body"])
    assert (cfg.objective, cfg.prepare_workers, cfg.train_dataset, cfg.train_dataset_config,
            cfg.text_field) == ("mlm", 3, "wikitext", "wikitext-2-raw-v1", "body")


def test_an_obsolete_dupe_factor_warns_once_and_is_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        cfg = pretrain_config.validate(PretrainConfig(dupe_factor=10))
        again = pretrain_config.validate(cfg)  # pretrain() validates a loaded config again
    assert cfg.dupe_factor == again.dupe_factor == 1
    assert [r.getMessage() for r in caplog.records] == [
        "config.dupe_factor: 10 is ignored (set to 1): pairs are redrawn every epoch from "
        "(data_seed, epoch), which is the original's dupe_factor without multiplying the disk"]


def test_no_shipped_config_sets_dupe_factor(caplog):
    with caplog.at_level(logging.WARNING, logger="bert_jax"):
        for path in sorted(glob.glob("configs/pretrain_*.py")):
            pretrain_config.load_config(path)
    assert not any("dupe_factor" in r.getMessage() for r in caplog.records)


def test_the_default_run_uses_the_bundled_vocabulary_of_its_corpus():
    """The default run does not train its vocabulary (two `tokenizers` trainings can differ
    in a few ids): it loads the one bundled beside the novels, so a step-based default run
    repeats exactly."""
    import os

    from bert_jax import resources
    from bert_jax.data import tokenizer
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = pretrain_config.load_config(os.path.join(root, "configs", "pretrain_tiny.py"))
    # inside the package, whatever the working directory; named as saved runs name them
    assert cfg.vocab == os.path.join(resources.BUNDLED, "austen", "vocab")
    assert cfg.train_files == os.path.join(resources.BUNDLED, "austen", "*.txt")
    assert (resources.portable(cfg.vocab), resources.portable(cfg.train_files)) == (
        "data/austen/vocab", "data/austen/*.txt")
    tok = tokenizer.load(cfg.vocab)
    assert tok.get_vocab_size(with_added_tokens=True) == cfg.vocab_size == 8192
    ids = tok.encode("Emma Woodhouse, handsome, clever, and rich").ids
    assert [tok.id_to_token(i) for i in ids] == [
        "[CLS]", "emma", "woodhouse", ",", "handsome", ",", "clever", ",", "and", "rich", "[SEP]"]
