"""The table of fine-tuning tasks: every task is complete, and its loss is the cross-entropy
transformers computes for its head."""

import numpy as np
import pytest

from bert_jax import tasks
from bert_jax.models.task_models import ARCHITECTURES
from bert_jax.tasks import TASKS


@pytest.mark.parametrize("name", list(TASKS))
def test_a_task_has_all_a_job_and_predict_need(name):
    task = TASKS[name]
    assert task.name == name
    model, heads = ARCHITECTURES[task.architecture]
    assert task.model is model and heads == {task.head}
    assert task.metrics and set(task.headline) >= set(task.metrics[:1])
    assert task.about and callable(task.load) and callable(task.summary)
    if task.predict is not None:
        assert task.predict.output_types and task.predict.about
        assert tasks.of_architecture(task.architecture) is task


def test_a_model_of_no_predictable_task_gets_the_default():
    assert tasks.of_architecture("BertForMultipleChoice") is TASKS[tasks.DEFAULT]
    assert tasks.of_architecture(None) is TASKS[tasks.DEFAULT]


def _torch_losses(name, logits, batch):
    import torch
    import torch.nn.functional as F
    t = {k: torch.tensor(np.asarray(v)) for k, v in batch.items()}
    if name == "question-answering":
        start, end = (torch.tensor(np.asarray(x)) for x in logits)
        return ((F.cross_entropy(start, t["start_positions"])
                 + F.cross_entropy(end, t["end_positions"])) / 2).item()
    logits = torch.tensor(np.asarray(logits))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t["labels"].reshape(-1),
                           ignore_index=-100).item()


@pytest.mark.parametrize("name", list(TASKS))
def test_each_loss_is_the_transformers_cross_entropy(name):
    rng = np.random.default_rng(0)
    if name == "question-answering":
        logits = tuple(rng.normal(size=(4, 9)).astype(np.float32) for _ in range(2))
        batch = {"start_positions": np.array([0, 3, 8, 2]), "end_positions": np.array([0, 5, 8, 1])}
    elif name == "token-classification":
        logits = rng.normal(size=(3, 7, 5)).astype(np.float32)
        labels = rng.integers(0, 5, size=(3, 7))
        labels[:, 0] = labels[:, -2:] = -100  # [CLS], padding, later pieces: not scored
        batch = {"labels": labels}
    else:  # sequences, and multiple choice's (B, C) choice logits
        logits = rng.normal(size=(6, 3)).astype(np.float32)
        batch = {"labels": rng.integers(0, 3, size=6)}
    metrics = TASKS[name].loss(logits, batch)
    total, count = metrics["loss"]
    assert float(total) / float(count) == pytest.approx(_torch_losses(name, logits, batch),
                                                        rel=1e-5)
    assert 0 <= float(metrics["accuracy"][0]) <= float(metrics["accuracy"][1]) == float(count)
