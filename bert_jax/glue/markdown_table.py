"""The GLUE table as the BERT paper prints it (Table 1: a column per task, two-score tasks as
"a/b", scores ×100, the average last), and every run's scores under it: results.md."""

from __future__ import annotations

from bert_jax.glue.benchmark import GlueTask

NAMES = {"mcc": "Matthews corr.", "accuracy": "accuracy", "f1": "F1", "pearson": "Pearson",
         "spearman": "Spearman", "matched_accuracy": "matched acc.",
         "mismatched_accuracy": "mismatched acc."}
HEADINGS = {"MNLI": "MNLI-m/mm"}


def cell(task: GlueTask, scores: dict) -> str:
    """The task's official scores ×100, one decimal, "a/b" for two."""
    return "/".join(f"{100 * scores[m]:.1f}" for m in task.metrics)


def scores_line(task: GlueTask, scores: dict) -> str:
    """One progress line's scores: "F1 88.9, accuracy 84.8"."""
    return ", ".join(f"{NAMES[m]} {100 * scores[m]:.1f}" for m in task.metrics)


def markdown(tasks: list[GlueTask], results: dict) -> str:
    """results.md: the dev table (best run per task), its settings, then every run."""
    settings = results["settings"]
    best = [results["tasks"][t.name]["best"] for t in tasks]
    head = [HEADINGS.get(t.name, t.name) for t in tasks]
    lines = [f"# GLUE dev results: {settings['init_from']}", "",
             "| | " + " | ".join(head) + " | Average |",
             "|---|" + "---|" * (len(tasks) + 1),
             "| dev | " + " | ".join(cell(t, b["scores"])
                                    for t, b in zip(tasks, best, strict=True))
             + f" | {100 * results['average']:.1f} |",
             "| learning rate | " + " | ".join(f"{b['learning_rate']:g}" for b in best) + " | |",
             "",
             "Scores ×100 on the dev sets, each task's best run: "
             + "; ".join(f"{t.name} {', '.join(NAMES[m] for m in t.metrics)}" for t in tasks)
             + ". The average is GLUE's: the mean of each task's score, a two-score task "
               "counting their mean"
             + ("" if len(tasks) == 9 else ", over this task only" if len(tasks) == 1
                else f", over these {len(tasks)} tasks only") + ". "
             + f"Recipe: {settings['epochs']} epoch{'s' * (settings['epochs'] != 1)}, "
               f"batch {settings['batch_size']}, "
               f"{settings['max_seq_length']} tokens, learning rates "
             + ", ".join(f"{lr:g}" for lr in settings["learning_rates"]) + ", seeds "
             + ", ".join(str(seed) for seed in settings["seeds"])
             + (f", at most {settings['max_train_examples']} training rows per task"
                if settings["max_train_examples"] else "")
             + f"; data: {settings['data_dir'] or settings['hub']}. Test-set predictions for "
               "the GLUE server are in submission/.",
             "", "## Every run", "",
             "| task | learning rate | seed | dev scores | best epoch | steps |",
             "|---|---|---|---|---|---|"]
    for task in tasks:
        for run in results["tasks"][task.name]["runs"]:
            lines.append(f"| {task.name} | {run['learning_rate']:g} | {run['seed']} | "
                         f"{scores_line(task, run['scores'])} | {run['best_epoch']} | "
                         f"{run['steps']} |")
    return "\n".join(lines) + "\n"
