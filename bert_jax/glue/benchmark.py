"""The GLUE tasks: for each, its splits in the original download's folders and on the hub
(`nyu-mll/glue`), its columns, the label values the GLUE server takes, its official metrics and
the names of its submission files. One explicit table, BENCHMARK; nothing is looked up by name
elsewhere."""

from __future__ import annotations

import dataclasses
from typing import Optional

from bert_jax.errors import BertJaxError

BINARY = ("0", "1")  # the server's values for CoLA, SST-2, MRPC, QQP, WNLI (hub index order)
NLI3 = ("entailment", "neutral", "contradiction")
NLI2 = ("entailment", "not_entailment")
HUB = "nyu-mll/glue"


@dataclasses.dataclass(frozen=True)
class Split:
    """Where one split is: a TSV under the data dir, and a hub configuration's split.

    `columns` name the local TSV's (text, pair or "", label or "") columns by header; an int is
    a position in a file without a header (CoLA's train and dev). Test splits have no label
    column and an index column (`index_column`, or the row number when "").
    """

    file: str  # relative to the data dir, e.g. "CoLA/train.tsv"
    columns: tuple
    hub_config: str
    hub_split: str
    index_column: str = ""
    header: bool = True

    @property
    def labelled(self) -> bool:
        return bool(self.columns[2] != "")


@dataclasses.dataclass(frozen=True)
class GlueTask:
    name: str  # the folder name and --tasks value (case-insensitive), e.g. "SST-2"
    labels: tuple  # the server's label values in the hub's ClassLabel order; () = regression
    metrics: tuple  # official scores, the one the BERT paper's table shows first
    hub_columns: tuple  # the hub configuration's (text, pair or "") columns
    splits: dict  # {split: Split}: train, validation, test; MNLI adds *_mismatched, diagnostic
    submissions: dict  # {split: the server's file name for its predictions}

    @property
    def regression(self) -> bool:
        return not self.labels

    @property
    def pair(self) -> bool:
        return bool(self.hub_columns[1])

    def scored_splits(self) -> tuple:
        """The labelled splits scored on dev: validation (and validation_mismatched)."""
        return tuple(s for s in self.splits if s.startswith("validation"))


def _task(name: str, labels: tuple, metrics: tuple, hub_config: str, hub_columns: tuple,
          columns: tuple, test_columns: tuple, index_column: str = "index",
          headerless_dev: bool = False) -> GlueTask:
    """The usual layout: {name}/train.tsv, dev.tsv, test.tsv; hub train, validation, test."""
    labelled = dict(columns=columns, hub_config=hub_config, header=not headerless_dev)
    splits = {
        "train": Split(f"{name}/train.tsv", hub_split="train", **labelled),
        "validation": Split(f"{name}/dev.tsv", hub_split="validation", **labelled),
        "test": Split(f"{name}/test.tsv", test_columns + ("",), hub_config, "test",
                      index_column),
    }
    return GlueTask(name, labels, metrics, hub_columns, splits, {"test": f"{name}.tsv"})


def _mnli() -> GlueTask:
    columns, test = ("sentence1", "sentence2", "gold_label"), ("sentence1", "sentence2", "")
    splits = {
        "train": Split("MNLI/train.tsv", columns, "mnli", "train"),
        "validation": Split("MNLI/dev_matched.tsv", columns, "mnli", "validation_matched"),
        "validation_mismatched": Split("MNLI/dev_mismatched.tsv", columns, "mnli",
                                       "validation_mismatched"),
        "test": Split("MNLI/test_matched.tsv", test, "mnli", "test_matched", "index"),
        "test_mismatched": Split("MNLI/test_mismatched.tsv", test, "mnli", "test_mismatched",
                                 "index"),
        # the diagnostic set (AX) is predicted with the MNLI model
        "diagnostic": Split("diagnostic/diagnostic.tsv", test, "ax", "test", "index"),
    }
    return GlueTask("MNLI", NLI3, ("matched_accuracy", "mismatched_accuracy"),
                    ("premise", "hypothesis"), splits,
                    {"test": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv",
                     "diagnostic": "AX.tsv"})


BENCHMARK: dict[str, GlueTask] = {t.name: t for t in (
    _task("CoLA", BINARY, ("mcc",), "cola", ("sentence", ""), (3, "", 1),
          ("sentence", ""), headerless_dev=True),
    _task("SST-2", BINARY, ("accuracy",), "sst2", ("sentence", ""), ("sentence", "", "label"),
          ("sentence", "")),
    _task("MRPC", BINARY, ("f1", "accuracy"), "mrpc", ("sentence1", "sentence2"),
          ("#1 String", "#2 String", "Quality"), ("#1 String", "#2 String")),
    _task("STS-B", (), ("pearson", "spearman"), "stsb", ("sentence1", "sentence2"),
          ("sentence1", "sentence2", "score"), ("sentence1", "sentence2")),
    _task("QQP", BINARY, ("f1", "accuracy"), "qqp", ("question1", "question2"),
          ("question1", "question2", "is_duplicate"), ("question1", "question2"),
          index_column="id"),
    _mnli(),
    _task("QNLI", NLI2, ("accuracy",), "qnli", ("question", "sentence"),
          ("question", "sentence", "label"), ("question", "sentence")),
    _task("RTE", NLI2, ("accuracy",), "rte", ("sentence1", "sentence2"),
          ("sentence1", "sentence2", "label"), ("sentence1", "sentence2")),
    _task("WNLI", BINARY, ("accuracy",), "wnli", ("sentence1", "sentence2"),
          ("sentence1", "sentence2", "label"), ("sentence1", "sentence2")),
)}
# QQP's download has rows broken by stray newlines and tabs: counted and skipped, not an error
SKIPS_MALFORMED = frozenset({"QQP"})


def select(names: Optional[str]) -> tuple[GlueTask, ...]:
    """The tasks a comma-separated --tasks names (any case; "" or None: all nine), in the
    table's order."""
    if not names:
        return tuple(BENCHMARK.values())
    by_lower = {name.lower(): task for name, task in BENCHMARK.items()}
    by_lower.update({name.lower().replace("-", ""): task for name, task in BENCHMARK.items()})
    wanted = []
    for name in (n.strip() for n in names.split(",")):
        task = by_lower.get(name.lower())
        if task is None:
            raise BertJaxError(f"tasks: unknown GLUE task {name!r}; expected some of "
                               f"{', '.join(BENCHMARK)}")
        wanted.append(task.name)
    return tuple(t for t in BENCHMARK.values() if t.name in wanted)
