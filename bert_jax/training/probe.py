"""A downstream probe while pretraining: does what the encoder has learned help a labelled task?

At every held-out evaluation the encoder's frozen, mean-pooled last-layer features of a
labelled text file are split in two halves (alternate rows, so both halves keep the file's
class mix); an L2-regularised logistic regression (scikit-learn's default objective: C = 1,
intercept free, on features standardised with the first half's statistics) is fitted on the
first half and the second half is scored by Matthews correlation. Mean pooling, not [CLS]:
before fine-tuning [CLS] is only trained by NSP, while every token's state is trained by MLM,
so the mean is what pretraining can already offer a sentence-level head. The fit is a few
hundred L-BFGS steps on (examples × hidden) floats: seconds, not minutes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import numpy as np

from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig
from bert_jax.runtime import sharding

log = logging.getLogger("bert_jax")

BATCH = 64


@dataclasses.dataclass(frozen=True)
class ProbeData:
    name: str  # logged as probe/<name>
    texts: list  # (N,) the rows' texts
    max_seq_length: int  # tokens a text is cut to
    labels: np.ndarray  # (N,) class ids
    num_classes: int


def probe_name(path: str) -> str:
    """The file's stem, or its folder's name for a split file (data/fine_foods/train.csv →
    fine_foods), so the logged name says which task it is."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.lower() in ("train", "training", "test", "dev", "validation", "valid", "eval"):
        return os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
    return stem


def load_probe(path: str, tok, max_seq_length: int, text_column: str, label_column: str,
               examples: int) -> ProbeData:
    """The first `examples` labelled rows of a csv / tsv / json / jsonl / parquet file."""
    from bert_jax.tasks import table_files
    from bert_jax.tasks.classification import label_ids, label_names
    table = table_files.read_table(path)
    table_files.check_columns(table, path, [text_column, label_column])
    table = table_files.drop_empty(table, path, [text_column, label_column])
    table = table.select(range(min(examples, len(table))))
    names = label_names(table, label_column)
    if len(table) < 4 or len(names) < 2:
        raise BertJaxError(f"config.probe_file {path}: expected at least 4 rows and 2 labels "
                           f"in column {label_column!r}, got {len(table)} rows, "
                           f"{len(names)} label(s)")
    return ProbeData(probe_name(path), table_files.texts_of(table, text_column, path),
                     max_seq_length,
                     np.asarray(label_ids(table, label_column, names, path)), len(names))


def features(config, params, tok, data: ProbeData) -> np.ndarray:
    """(N, H) float64 mean-pooled last-layer states: `bert-jax embed --pooling mean`'s."""
    from bert_jax import inference
    return inference.embed(config, {"bert": params}, tok, data.texts, pooling="mean",
                           max_seq_length=data.max_seq_length,
                           batch_size=BATCH).astype(np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, num_classes: int, c: float = 1.0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) of scikit-learn's LogisticRegression(C=c): minimise C · Σ log-loss + ½‖W‖², the
    intercept unpenalised; one weight column (a sigmoid) for two classes, as it does, else a
    column per class (multinomial). L-BFGS with the exact gradient. Scores are x @ W + b
    (for two classes, > 0 is class 1)."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp
    n, d = x.shape
    k = 1 if num_classes == 2 else num_classes
    target = y[:, None].astype(np.float64) if k == 1 else np.eye(num_classes)[y]

    def loss_and_grad(theta):
        w, b = theta[:d * k].reshape(d, k), theta[d * k:]
        z = x @ w + b
        if k == 1:  # log-loss of a sigmoid: log(1 + e^z) − y·z
            loss_rows = np.logaddexp(0.0, z) - target * z
            err = c * (1.0 / (1.0 + np.exp(-z)) - target)
        else:
            log_p = z - logsumexp(z, axis=1, keepdims=True)
            loss_rows = -(target * log_p)
            err = c * (np.exp(log_p) - target)
        loss = c * loss_rows.sum() + 0.5 * (w * w).sum()
        return loss, np.concatenate([(x.T @ err + w).ravel(), err.sum(0)])
    result = minimize(loss_and_grad, np.zeros(d * k + k), jac=True, method="L-BFGS-B",
                      options={"maxiter": 2000, "gtol": 1e-8})
    return result.x[:d * k].reshape(d, k), result.x[d * k:]


def predict_logistic(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    z = x @ w + b
    return (z[:, 0] > 0).astype(np.int64) if z.shape[1] == 1 else np.argmax(z, axis=1)


def probe_score(x: np.ndarray, y: np.ndarray, num_classes: int) -> float:
    """MCC of a logistic regression fitted on the even rows, scored on the odd rows."""
    from bert_jax.tasks.classification import classification_scores
    fit_x, fit_y, test_x, test_y = x[0::2], y[0::2], x[1::2], y[1::2]
    mean, std = fit_x.mean(0), fit_x.std(0) + 1e-8
    w, b = fit_logistic((fit_x - mean) / std, fit_y, num_classes)
    predictions = predict_logistic((test_x - mean) / std, w, b)
    return classification_scores(test_y, predictions, num_classes)["mcc"]


def run_probe(config, params, tok, data: ProbeData) -> dict[str, float]:
    """{name: MCC} of the encoder `params` (the pretraining params' "bert" subtree)."""
    return {data.name: probe_score(features(config, params, tok, data), data.labels,
                                   data.num_classes)}


def prober(cfg, config: BertConfig, tok, writer, main: bool):
    """The probe of cfg.probe_file at an evaluation: (step, state) → {name: MCC}, logged; on
    process 0 only (every process holds the replicated params; the others return {})."""
    if not cfg.probe_file:
        return None
    data = load_probe(cfg.probe_file, tok, cfg.max_seq_length, cfg.probe_text_column,
                      cfg.probe_label_column, cfg.probe_examples)

    def run_it(step, state):
        params = sharding.fetch(state.params)["bert"]
        if not main:
            return {}
        start = time.perf_counter()
        scores = run_probe(config, params, tok, data)
        writer.write(step, "probe", scores)
        log.info("probe step %d: %s (%.1f s, %d rows)", step,
                 ", ".join(f"{k} MCC {v:.4f}" for k, v in scores.items()),
                 time.perf_counter() - start, len(data.labels))
        return scores
    return run_it
