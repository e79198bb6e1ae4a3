"""SQuAD v1.1 / v2.0 span question answering data: read and check examples, cut windowed features.

Examples come from the official SQuAD JSON, from records in the Hugging Face `squad` /
`squad_v2` layout (jsonl, json, csv, parquet) or from a `datasets` hub name. Features are the
windows Hugging Face's run_qa cuts: (question, context) pairs truncated "only_second" with
`doc_stride` tokens of overlap between consecutive windows, every overflowing window kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Sequence

import numpy as np

from bert_jax import json_limits
from bert_jax.data import text_files
from bert_jax.data.tokenizer import _restore
from bert_jax.errors import BertJaxError
from bert_jax.tasks import tables

if TYPE_CHECKING:
    import datasets

COLUMNS = ("id", "question", "context", "answers")
# windows per encode_batch call (whole examples, at least one): bounds the Encoding objects alive
# at once, however many windows a long context makes
_ENCODE_WINDOWS = 1000


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
    return examples_from_table(tables.read_table(path), path)


def examples_from_table(table: datasets.Dataset, where: str) -> list[QAExample]:
    """Rows in the `squad` / `squad_v2` layout (a hub split or a local table) → examples."""
    tables.check_columns(table, where, COLUMNS)
    columns = {c: table[c] for c in COLUMNS}
    return [_example({c: columns[c][i] for c in COLUMNS}, where, i) for i in range(len(table))]


def load_splits(dataset: str, dataset_config: str, files: dict[str, str]
                ) -> dict[str, tuple[str, list[QAExample]]]:
    """{split: (name for messages, examples)} from a hub dataset (only the splits named in
    `files`, when given) or, when dataset is "", from {split: path} local files."""
    if dataset:
        splits = tables.load_splits(dataset, dataset_config, files or None)
        return {split: (where, examples_from_table(table, where))
                for split, (where, table) in splits.items()}
    return {split: (path, read_examples(path)) for split, path in (files or {}).items() if path}


def _from_squad_json(data: dict, path: str) -> list[QAExample]:
    """The official layout; `is_impossible` true means no answer whatever `answers` holds (v2
    train files keep `plausible_answers` there, which are not gold)."""
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
                row["answers"] = [] if impossible else _field(qa, "answers", path, where)
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


# -- features ----------------------------------------------------------------------------------

def features(tok, examples: Sequence[QAExample], max_seq_length: int, doc_stride: int,
             training: bool, where: str = "features") -> dict[str, np.ndarray]:
    """Examples → windows, exactly as transformers' BertTokenizerFast(question, context,
    truncation="only_second", max_seq_length, stride=doc_stride, return_overflowing_tokens=True,
    return_offsets_mapping=True, padding="max_seq_length") cuts them.

    Returns N windows (N ≥ len(examples)): input_ids, token_type_ids, attention_mask (N, L)
    int32; example_index (N,) int32; offsets (N, L, 2) int32, character (start, end) into the
    context for context tokens and (-1, -1) elsewhere. training=True adds start_positions,
    end_positions (N,) int32: the first answer's first and last token in the window, or 0
    ([CLS]) when the answer is not wholly inside the window or there is none (run_qa's rule).
    `where` (the file or split) names the examples in a refusal.
    """
    if (not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool)
            or max_seq_length < 4):
        raise BertJaxError(f"max_seq_length: expected an integer ≥ 4, got {max_seq_length!r}")
    if not isinstance(doc_stride, int) or isinstance(doc_stride, bool) or doc_stride < 0:
        raise BertJaxError(f"doc_stride: expected an integer ≥ 0, got {doc_stride!r}")
    if not examples:
        raise BertJaxError("features: no examples")
    old_truncation, old_padding = tok.truncation, tok.padding
    parts = []
    try:  # set per call and restored: the Tokenizer object is shared, its settings are global
        tok.no_truncation()
        tok.no_padding()
        windows = _check_lengths(tok, examples, max_seq_length, doc_stride,
                                 tok.num_special_tokens_to_add(True), where)
        tok.enable_truncation(max_seq_length, stride=doc_stride, strategy="only_second",
                              direction="right")
        tok.enable_padding(direction="right", pad_id=tok.token_to_id("[PAD]"), pad_type_id=0,
                           pad_token="[PAD]", length=max_seq_length)
        for lo, hi in _chunks(windows, _ENCODE_WINDOWS):
            chunk = examples[lo:hi]
            encodings = tok.encode_batch([(ex.question, ex.context) for ex in chunk])
            # transformers' order: each example's first window, then its overflows
            parts.append(_arrays([(lo + i, w) for i, enc in enumerate(encodings)
                                  for w in [enc] + enc.overflowing], max_seq_length))
    finally:
        _restore(tok, old_truncation, old_padding)
    out = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    if training:
        out["start_positions"], out["end_positions"] = _positions(out, examples)
    return out


def _arrays(windows: list, max_seq_length: int) -> dict[str, np.ndarray]:
    """(example index, Encoding) pairs → numpy columns, so that Encoding objects (tens of KB
    each, token strings included) live only for one chunk."""
    n = len(windows)

    def column(name: str) -> np.ndarray:  # (n, L) int32 from one Encoding attribute
        return np.asarray([getattr(e, name) for _, e in windows], np.int32).reshape(
            n, max_seq_length)

    out = {"input_ids": column("ids"), "token_type_ids": column("type_ids"),
           "attention_mask": column("attention_mask"),
           "example_index": np.asarray([i for i, _ in windows], np.int32)}
    # context tokens: segment 1 and not a template special ([SEP]) or padding
    is_context = (out["token_type_ids"] == 1) & (column("special_tokens_mask") == 0)
    offsets = np.asarray([e.offsets for _, e in windows], np.int32).reshape(n, max_seq_length, 2)
    out["offsets"] = np.where(is_context[..., None], offsets, -1).astype(np.int32)
    return out


def _chunks(windows: list[int], size: int):
    """(lo, hi) runs of examples with about `size` windows each (at least one example)."""
    lo, count = 0, 0
    for i, n in enumerate(windows):
        count += n
        if count >= size:
            yield lo, i + 1
            lo, count = i + 1, 0
    if lo < len(windows):
        yield lo, len(windows)


def _check_lengths(tok, examples, max_seq_length: int, doc_stride: int, special: int,
                   where: str) -> list[int]:
    """Refuse before the Rust tokenizer does: on a stride ≥ the context room it panics (a
    PanicException, which `except Exception` misses), on a question with no room it errors
    without naming the example. Returns each example's number of windows."""
    questions = tok.encode_batch([ex.question for ex in examples], add_special_tokens=False)
    contexts = {}
    for ex in examples:
        contexts.setdefault(ex.context, None)
    unique = list(contexts)
    for c, enc in zip(unique, tok.encode_batch(unique, add_special_tokens=False)):
        contexts[c] = len(enc.ids)
    windows = []
    for ex, q in zip(examples, questions):
        room = max_seq_length - len(q.ids) - special  # context tokens per window
        if room < 1:
            raise BertJaxError(f"{where}: question {ex.id!r} has {len(q.ids)} tokens; "
                               f"max_seq_length {max_seq_length} leaves no room for the context")
        if contexts[ex.context] > room and doc_stride >= room:
            raise BertJaxError(f"doc_stride: {doc_stride} must be less than the {room} context "
                               f"tokens a window of max_seq_length {max_seq_length} leaves beside "
                               f"question {ex.id!r} of {where} ({len(q.ids)} tokens), or "
                               f"windows cannot advance")
        beyond = contexts[ex.context] - room  # tokens past the first window, a stride apart
        windows.append(1 if beyond <= 0 else 1 + -(-beyond // (room - doc_stride)))
    return windows


def _positions(out: dict, examples) -> tuple[np.ndarray, np.ndarray]:
    """Token span of each window's answer: the last context token starting at or before the
    answer's first character, the first one ending at or after its last; 0 when outside."""
    offsets, index = out["offsets"], out["example_index"]
    starts = np.zeros(len(index), np.int32)
    ends = np.zeros(len(index), np.int32)
    for w, i in enumerate(index):
        ex = examples[i]
        if not ex.answers:
            continue
        s_char = ex.answer_starts[0]
        e_char = s_char + len(ex.answers[0])
        ctx = np.flatnonzero(offsets[w, :, 0] >= 0)
        if len(ctx) == 0 or offsets[w, ctx[0], 0] > s_char or offsets[w, ctx[-1], 1] < e_char:
            continue
        starts[w] = ctx[offsets[w, ctx, 0] <= s_char][-1]
        ends[w] = ctx[offsets[w, ctx, 1] >= e_char][0]
    return starts, ends
