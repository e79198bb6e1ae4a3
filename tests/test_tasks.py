"""The table of fine-tuning tasks: every task is complete, and its loss is the one
transformers computes for its head (cross-entropy; mean-squared error for regression)."""

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
        assert tasks.of_architecture(task.architecture, task.problem_type) is task


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
    if name == "regression":
        return F.mse_loss(logits[:, 0], t["labels"]).item()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t["labels"].reshape(-1),
                           ignore_index=-100).item()


@pytest.mark.parametrize("name", list(TASKS))
def test_each_loss_is_the_transformers_loss(name):
    """Cross-entropy for the classifiers, mean-squared error for regression."""
    rng = np.random.default_rng(0)
    if name == "question-answering":
        logits = tuple(rng.normal(size=(4, 9)).astype(np.float32) for _ in range(2))
        batch = {"start_positions": np.array([0, 3, 8, 2]), "end_positions": np.array([0, 5, 8, 1])}
    elif name == "token-classification":
        logits = rng.normal(size=(3, 7, 5)).astype(np.float32)
        labels = rng.integers(0, 5, size=(3, 7))
        labels[:, 0] = labels[:, -2:] = -100  # [CLS], padding, later pieces: not scored
        batch = {"labels": labels}
    elif name == "regression":
        logits = rng.normal(size=(6, 1)).astype(np.float32)
        batch = {"labels": rng.uniform(0, 5, 6).astype(np.float32)}
    else:  # sequences, and multiple choice's (B, C) choice logits
        logits = rng.normal(size=(6, 3)).astype(np.float32)
        batch = {"labels": rng.integers(0, 3, size=6)}
    metrics = TASKS[name].loss(logits, batch)
    total, count = metrics["loss"]
    assert float(total) / float(count) == pytest.approx(_torch_losses(name, logits, batch),
                                                        rel=1e-5)
    if name != "regression":  # no accuracy to count
        assert 0 <= float(metrics["accuracy"][0]) <= float(metrics["accuracy"][1]) == float(count)


@pytest.mark.filterwarnings("ignore:A single label was found")  # sklearn on a one-class draw
def test_classification_scores_equal_scikit_learn_on_random_cases():
    """Accuracy, macro-F1 over the classes present in labels or predictions (scikit-learn's
    default: a class in neither is not averaged as 0) and MCC, on random labellings."""
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    from bert_jax.tasks.classification import classification_scores
    assert classification_scores([0, 1, 0, 1], [0, 1, 0, 1], 3)["macro_f1"] == 1.0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        classes, n = int(rng.integers(2, 7)), int(rng.integers(1, 40))
        labels = rng.integers(0, classes, n)
        predictions = np.where(rng.random(n) < 0.5, labels, rng.integers(0, classes, n))
        ours = classification_scores(labels, predictions, classes)
        assert ours["accuracy"] == pytest.approx(accuracy_score(labels, predictions))
        assert ours["macro_f1"] == pytest.approx(
            f1_score(labels, predictions, average="macro", zero_division=0)), seed
        assert ours["mcc"] == pytest.approx(matthews_corrcoef(labels, predictions), abs=1e-12)


def test_multiple_choice_reads_the_label_column_it_is_given(tmp_path, minilm_dir):
    from bert_jax.data import tokenizer
    from bert_jax.errors import BertJaxError
    from bert_jax.training.finetune_config import FinetuneConfig
    path = tmp_path / "t.csv"
    path.write_text("sent1,sent2,ending0,ending1,answer\n"
                    + "".join(f"the {i} cat,sat on,the mat,a hat,{i % 2}\n" for i in range(6)))
    cfg = FinetuneConfig(task="multiple-choice", init_from="m", train_file=str(path),
                         validation_file=str(path), max_seq_length=16, num_choices=2,
                         label_column="answer")
    tok = tokenizer.load(minilm_dir)
    task_data = TASKS["multiple-choice"].load(cfg, tok)
    assert list(task_data.train["labels"]) == [i % 2 for i in range(6)]
    with pytest.raises(BertJaxError, match=rf"^{path}: has no labels to train on \(column "
                                           r"'label'\)$"):
        TASKS["multiple-choice"].load(cfg.replace(label_column="label"), tok)
