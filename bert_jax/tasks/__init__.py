"""The fine-tuning tasks, one module each, and the one table of them.

A task module holds everything that differs between tasks: reading and encoding its data,
its loss, decoding its outputs (classes, answers, tags, choices), its scores and what `predict`
writes, gathered in one `Task` (tasks/task.py). The config, the fine-tuning job, `predict` and
the CLI read TASKS and name no task themselves: adding a task is a module, a line here, a
config and its tests.
"""

from __future__ import annotations

from typing import Optional

from bert_jax.tasks import (classification, multiple_choice, question_answering, regression,
                            token_classification)
from bert_jax.tasks.task import Task

TASKS: dict[str, Task] = {task.name: task for task in (
    classification.TASK,
    regression.TASK,
    question_answering.TASK,
    token_classification.TASK,
    multiple_choice.TASK,
)}
DEFAULT = classification.TASK.name  # config.task's default, and predict's for a plain encoder


def predictable() -> dict[str, Task]:
    """The tasks `bert-jax predict` offers."""
    return {name: task for name, task in TASKS.items() if task.predict is not None}


def of_architecture(architecture: Optional[str], problem_type: Optional[str] = None) -> Task:
    """The task `predict` runs for a model of this architecture and problem_type; the default
    task for others (which refuses a model that is not its own, naming both)."""
    found = [t for t in predictable().values()
             if t.architecture == architecture and t.problem_type == problem_type]
    found = found or [t for t in predictable().values() if t.architecture == architecture]
    return found[0] if found else TASKS[DEFAULT]


def of_model(architecture: Optional[str], config) -> Task:
    """The task of a model: of_architecture, with a one-output sequence classifier read as a
    regression, as transformers does when problem_type is not set."""
    problem_type = config.problem_type
    if (problem_type is None and architecture == regression.TASK.architecture
            and config.num_labels == 1):
        problem_type = regression.TASK.problem_type
    return of_architecture(architecture, problem_type)
