"""PretrainConfig.validate: a warm-up longer than the run is shortened to it, with a warning."""

import logging

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
