"""The downstream probe (bert_jax/training/probe.py): its logistic regression is scikit-learn's;
a missing probe file is refused before any work. (That a run logs probe/<name> at every
evaluation is tests/test_pretrain.py's, where the small run's programs are already compiled.)"""

import numpy as np
import pytest
from conftest import train_here

from bert_jax.training import probe


def _blobs(n, d, classes, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    centres = rng.normal(0, 0.6, (classes, d))
    return rng.normal(0, 1, (n, d)) * rng.uniform(0.5, 3, d) + centres[y], y


@pytest.mark.parametrize("classes", [2, 3])
def test_probe_score_is_scikit_learns_logistic_regression(classes):
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import matthews_corrcoef
    from sklearn.preprocessing import StandardScaler
    x, y = _blobs(600, 24, classes, seed=classes)
    fit_x, fit_y, test_x, test_y = x[0::2], y[0::2], x[1::2], y[1::2]
    scaler = StandardScaler().fit(fit_x)
    theirs = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(
        scaler.transform(fit_x), fit_y)
    want = matthews_corrcoef(test_y, theirs.predict(scaler.transform(test_x)))
    assert 0.2 < want < 0.95  # a task with signal and errors, so a wrong probe would show
    assert probe.probe_score(x, y, classes) == pytest.approx(want, abs=1e-9)
    w, b = probe.fit_logistic(scaler.transform(fit_x), fit_y, classes)
    np.testing.assert_allclose(w.T, theirs.coef_, atol=2e-4)
    np.testing.assert_allclose(b, theirs.intercept_, atol=2e-4)


def test_probe_name_says_which_task():
    assert probe.probe_name("data/fine_foods/train.csv") == "fine_foods"
    assert probe.probe_name("corpus/reviews.jsonl") == "reviews"


def test_a_missing_probe_file_is_refused_before_any_work(pretrain_setup, tmp_path, capsys):
    base, overrides = pretrain_setup
    workdir = tmp_path / "run"
    code = train_here(workdir, overrides, "--config.steps=2",
                      f"--config.probe_file={tmp_path / 'nope.csv'}")
    assert code == 2
    assert "config.probe_file" in capsys.readouterr().err and not workdir.exists()


def test_the_default_run_probes_fine_foods_training_reviews_never_the_test_file():
    import os

    from conftest import CONFIG

    from bert_jax import resources
    from bert_jax.training.config_files import run_config_file
    cfg = run_config_file(CONFIG)
    # the package's copy, found from any working directory
    assert resources.portable(cfg.probe_file) == "data/fine_foods/train.csv"
    assert cfg.probe_examples == 2000 and os.path.isfile(cfg.probe_file)
    assert probe.probe_name(cfg.probe_file) == "fine_foods"
