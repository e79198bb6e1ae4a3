"""SQuAD v1.1 / v2.0 span question answering data: read and check examples (`windows` cuts
them into the model's windows).

Examples come from the official SQuAD JSON, from records in the Hugging Face `squad` /
`squad_v2` layout (jsonl, json, csv, parquet) or from a `datasets` hub name.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Sequence

from bert_jax import json_limits
from bert_jax.data import text_files
from bert_jax.errors import BertJaxError
from bert_jax.tasks import table_files

if TYPE_CHECKING:
    import datasets

COLUMNS = ("id", "question", "context", "answers")


@dataclasses.dataclass(frozen=True)
class QAExample:
    """One question about one context; empty `answers` = unanswerable (SQuAD v2)."""
    id: str
    question: str
    context: str
    answers: tuple[str, ...]        # gold texts (several in dev sets)
    answer_starts: tuple[int, ...]  # character offsets into context, one per answer


# -- reading -----------------------------------------------------------------------------------

def read_examples(path: str) -> list[QAExample]:
    """A local file → examples: SQuAD JSON ({"data": [{"paragraphs": …}]}) or records with
    columns id, question, context, answers {text: [..], answer_start: [..]} (.jsonl, .json,
    .csv with answers as a JSON string, .parquet)."""
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: file not found")
    if path.lower().endswith(".json"):
        try:
            data = json_limits.loads(text_files.read_utf8(path), path)
        except json.JSONDecodeError as e:
            raise BertJaxError(f"{path}: not valid JSON ({e})") from None
        if isinstance(data, dict) and "data" in data:
            return _from_squad_json(data, path)
        if isinstance(data, list) and all(isinstance(r, dict) for r in data):
            if not data:
                raise BertJaxError(f"{path}: no rows")
            return [_example(r, path, i) for i, r in enumerate(data)]
        raise BertJaxError(f"{path}: expected SQuAD JSON (a top-level 'data' list) or a list "
                           f"of records with fields {', '.join(COLUMNS)}")
    return examples_from_table(table_files.read_table(path), path)


def read_squad_questions(path: str) -> list[QAExample] | None:
    """`predict`'s input in the official SQuAD JSON layout → examples, without answers (given
    or not, they are not read); None for any other file, which is read as a table."""
    if not (path.lower().endswith(".json") and os.path.isfile(path)):
        return None
    try:
        data = json_limits.loads(text_files.read_utf8(path), path)
    except json.JSONDecodeError:
        return None  # the table reader names the error
    if not (isinstance(data, dict) and "data" in data):
        return None
    return _from_squad_json(data, path, answers=False)


def examples_from_table(table: datasets.Dataset, where: str) -> list[QAExample]:
    """Rows in the `squad` / `squad_v2` layout (a hub split or a local table) → examples."""
    table_files.check_columns(table, where, COLUMNS)
    columns = {c: table[c] for c in COLUMNS}
    return [_example({c: columns[c][i] for c in COLUMNS}, where, i) for i in range(len(table))]


def load_splits(dataset: str, dataset_config: str, files: dict[str, str]
                ) -> dict[str, tuple[str, list[QAExample]]]:
    """{split: (name for messages, examples)} from a hub dataset (only the splits named in
    `files`, when given) or, when dataset is "", from {split: path} local files."""
    if dataset:
        splits = table_files.load_splits(dataset, dataset_config, files or None)
        return {split: (where, examples_from_table(table, where))
                for split, (where, table) in splits.items()}
    return {split: (path, read_examples(path)) for split, path in (files or {}).items() if path}


def _from_squad_json(data: dict, path: str, answers: bool = True) -> list[QAExample]:
    """The official layout; `is_impossible` true means no answer whatever `answers` holds (v2
    train files keep `plausible_answers` there, which are not gold). answers=False: questions
    only, for predict."""
    if not isinstance(data["data"], list):
        raise BertJaxError(f"{path}: field 'data' is not a list")
    examples = []
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(_field(article, "paragraphs", path, f"data[{a}]")):
            place = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", path, place)
            for q, qa in enumerate(_field(paragraph, "qas", path, place)):
                row = {"context": context, "id": _field(qa, "id", path, f"{place}.qas[{q}]")}
                where = f"{place}.qas[{q}] (question {row['id']!r})"
                row["question"] = _field(qa, "question", path, where)
                impossible = qa.get("is_impossible") is True
                row["answers"] = ([] if impossible or not answers
                                  else _field(qa, "answers", path, where))
                examples.append(_example(row, path, len(examples)))
    if not examples:
        raise BertJaxError(f"{path}: no questions")
    return examples


def _field(record, name: str, path: str, place: str):
    if not isinstance(record, dict):
        raise BertJaxError(f"{path}: {place} is not an object")
    if name not in record or record[name] is None:
        raise BertJaxError(f"{path}: {place}: no field {name!r}")
    return record[name]


def _example(row: dict, where: str, i: int) -> QAExample:
    """One record → QAExample; `i` is the 0-based row, shown 1-based."""
    for name in COLUMNS:
        if row.get(name) is None:  # absent, or an empty csv cell
            raise BertJaxError(f"{where}: row {i + 1}: no field {name!r} (missing or empty)")
    qid = str(row["id"])
    place = f"{where}: question {qid!r} (row {i + 1})"
    for name in ("question", "context"):
        if not isinstance(row[name], str):
            raise BertJaxError(f"{place}: {name} is {type(row[name]).__name__}, not text")
    texts, starts = _answers(row["answers"], place)
    return QAExample(qid, row["question"], row["context"], texts, starts)


def _answers(value, place: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """answers as {text: [..], answer_start: [..]} (HF), a list of {text, answer_start}
    (SQuAD), or either as a JSON string (csv cells)."""
    if isinstance(value, str):
        try:
            value = json_limits.loads(value, place)
        except json.JSONDecodeError:
            raise BertJaxError(f"{place}: answers is not JSON ({value[:40]!r})") from None
    if isinstance(value, list):
        if not all(isinstance(v, dict) and "text" in v and "answer_start" in v for v in value):
            raise BertJaxError(f"{place}: answers: expected a list of {{text, answer_start}}")
        value = {"text": [v["text"] for v in value],
                 "answer_start": [v["answer_start"] for v in value]}
    if not isinstance(value, dict) or "text" not in value or "answer_start" not in value:
        raise BertJaxError(f"{place}: answers: expected {{\"text\": [..], \"answer_start\": "
                           f"[..]}}, got {str(value)[:60]}")
    texts, starts = value["text"], value["answer_start"]
    texts = [texts] if isinstance(texts, str) else texts
    starts = [starts] if isinstance(starts, (int, float)) else starts
    if not isinstance(texts, (list, tuple)) or not isinstance(starts, (list, tuple)):
        raise BertJaxError(f"{place}: answers: text and answer_start must be lists, got "
                           f"{texts!r} and {starts!r}")
    if len(texts) != len(starts):
        raise BertJaxError(f"{place}: answers: {len(texts)} texts but {len(starts)} "
                           f"answer_start values")
    for t, s in zip(texts, starts):
        if not isinstance(t, str):
            raise BertJaxError(f"{place}: answer text {t!r} is not text")
        if (isinstance(s, bool) or not isinstance(s, (int, float))
                or (isinstance(s, float) and not s.is_integer())):
            raise BertJaxError(f"{place}: answer {t!r}: answer_start {s!r} is not an integer")
    return tuple(texts), tuple(int(s) for s in starts)


def check_examples(examples: Sequence[QAExample], where: str, training: bool) -> None:
    """Refuse, in one line, what would train or score silently wrong: empty question or
    context, an answer not at its answer_start, duplicate ids. Training uses only each
    answerable example's first answer, so only that one is checked there; evaluation checks
    every gold answer (a misplaced one points at a broken file)."""
    if not examples:
        raise BertJaxError(f"{where}: no examples")
    seen = {}
    for i, ex in enumerate(examples):
        place = f"{where}: question {ex.id!r} (row {i + 1})"
        if not ex.id:
            raise BertJaxError(f"{where}: row {i + 1}: empty id")
        if ex.id in seen:
            raise BertJaxError(f"{place}: duplicate id (also row {seen[ex.id] + 1})")
        seen[ex.id] = i
        for name in ("question", "context"):
            if not getattr(ex, name).strip():
                raise BertJaxError(f"{place}: empty {name}")
        if len(ex.answers) != len(ex.answer_starts):
            raise BertJaxError(f"{place}: {len(ex.answers)} answers but "
                               f"{len(ex.answer_starts)} answer_start values")
        for text, start in list(zip(ex.answers, ex.answer_starts))[:1 if training else None]:
            if not text:
                raise BertJaxError(f"{place}: empty answer text at answer_start {start}")
            found = ex.context[max(start, 0):start + len(text)]
            if start < 0 or found != text:
                raise BertJaxError(f"{place}: answer {text[:40]!r} is not at answer_start "
                                   f"{start} (context has {found[:40]!r})")
