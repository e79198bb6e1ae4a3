"""Word-tagged sentences (NER, POS, chunking) → first-piece-labelled windows, and back to words.

Files: CoNLL text (one `token ... tag` line per word, blank lines between sentences) or
json/jsonl/parquet rows with a list of tokens and a list of tags; or a `datasets` hub name.
Each word is labelled on its first word piece only (BERT paper, section 5.3); a sentence too
long for one window is split at word boundaries, so every word is predicted exactly once.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from bert_jax.data import text_files
from bert_jax.data.tokenizer import _restore
from bert_jax.errors import BertJaxError
from bert_jax.tasks import table_files
from bert_jax.tasks.classification import label_key

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

IGNORE = -100  # label of pieces that are not a word's first piece: no loss, no score
_TABLE_TYPES = (".csv", ".tsv", ".json", ".jsonl", ".parquet")


# -- read --------------------------------------------------------------------------------------

def read_conll(path: str, tags: bool = True, column: int = -1
               ) -> tuple[list[list[str]], list[list[str]]]:
    """(sentences, tags) of a CoNLL file: token = first column, tag = column `column` (0-based;
    -1, the last, is CoNLL-2003's NER; 1 its part of speech, 2 its chunk).

    Blank lines end sentences; -DOCSTART- lines are document breaks, not words. Any
    whitespace separates columns (CoNLL-2003 uses spaces, CoNLL-U style files tabs).
    tags=False reads words to tag (predict): one column is enough, other columns are ignored
    and the tags returned are empty lists.
    """
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: file not found")
    want_tags = tags
    sentences, tags, words, labels = [], [], [], []
    for number, line in enumerate(text_files.read_utf8(path).split("\n"), 1):
        columns = line.split()
        if not columns or columns[0].startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
                tags.append(labels)
            words, labels = [], []
            continue
        if len(columns) == 1 and want_tags:
            raise BertJaxError(f"{path}: line {number}: expected a token and a tag separated "
                               f"by whitespace, got one column {line.strip()!r}")
        if want_tags and not (column < len(columns) and column >= -len(columns) + 1
                              and column != 0):
            raise BertJaxError(f"{path}: line {number}: no tag column {column} (the line has "
                               f"{len(columns)} columns, the token first): {line.strip()!r}")
        words.append(columns[0])
        if want_tags:
            labels.append(columns[column])
    if words:
        sentences.append(words)
        tags.append(labels)
    if not sentences:
        raise BertJaxError(f"{path}: no sentences (expected CoNLL lines `token ... tag`)")
    return sentences, tags


def load_splits(dataset: str = "", dataset_config: str = "", files: Optional[dict] = None,
                tokens_column: str = "tokens", tags_column: str = "tags",
                repair_iob1: bool = True, conll_column: int = -1
                ) -> dict[str, tuple[str, list[list[str]], list[list[str]]]]:
    """{split: (name for messages, sentences, tags)}, words and tags as strings.

    `files` maps split → path: csv/tsv/json/jsonl/parquet are tables with a list column of
    tokens and one of tags; any other extension is CoNLL text. With `dataset`, a hub dataset
    (its `files` keys, if any, choose the splits). Integer tags of a Sequence(ClassLabel)
    feature become their names (conll2003's ner_tags); other integer tags stay as "0", "1"….
    conll_column: which column of a CoNLL file holds the tags (read_conll's `column`).
    repair_iob1: a split tagged IOB1 (the original CoNLL-2003 files start entities with I-)
    is rewritten as IOB2, with a warning, because strict IOB2 scoring ignores I- starts.
    """
    import datasets
    if dataset:
        read = table_files.load_splits(dataset, dataset_config, files)
    else:
        read = {}
        for split, path in (files or {}).items():
            if path and os.path.splitext(path)[1].lower() not in _TABLE_TYPES:
                read[split] = (path, read_conll(path, column=conll_column))
            elif path:
                read[split] = (path, table_files.read_table(path))
    out = {}
    for split, (where, table) in read.items():
        if isinstance(table, datasets.Dataset):
            sentences, tags = _rows(table, where, tokens_column, tags_column)
        else:
            sentences, tags = table
        if repair_iob1:
            tags = _repair_iob1(tags, where)
        out[split] = (where, sentences, tags)
    return out


def _rows(table: datasets.Dataset, where: str, tokens_column: str, tags_column: str
          ) -> tuple[list[list[str]], list[list[str]]]:
    import datasets
    table_files.check_columns(table, where, [tokens_column, tags_column])
    inner = getattr(table.features[tags_column], "feature", None)
    class_label = inner if isinstance(inner, datasets.ClassLabel) else None
    sentences, tags, empty = [], [], 0
    for row, (words, labels) in enumerate(zip(table[tokens_column], table[tags_column]), 1):
        words = _cells(words, where, row, tokens_column, None)
        labels = _cells(labels, where, row, tags_column, class_label)
        if len(words) != len(labels):
            raise BertJaxError(f"{where}: row {row}: {len(words)} tokens but {len(labels)} "
                               f"tags; expected one tag per token")
        if not words:
            empty += 1
            continue
        sentences.append(words)
        tags.append(labels)
    if empty:
        log.warning("%s: skipped %d of %d rows with no tokens", where, empty, len(table))
    if not sentences:
        raise BertJaxError(f"{where}: no sentences with tokens in column {tokens_column!r}")
    return sentences, tags


def _cells(value, where: str, row: int, column: str, class_label) -> list[str]:
    """One list cell as strings; None is an empty list (an empty sentence)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise BertJaxError(f"{where}: row {row}: column {column!r} is "
                           f"{type(value).__name__}; expected a list (one entry per word)")
    out = []
    for i, v in enumerate(value):
        if v is None:
            raise BertJaxError(f"{where}: row {row}: column {column!r} is empty at word "
                               f"{i + 1}")
        if class_label is not None:
            if not 0 <= v < class_label.num_classes:
                raise BertJaxError(f"{where}: row {row}: column {column!r} has tag id {v} at "
                                   f"word {i + 1}; expected 0..{class_label.num_classes - 1}")
            v = class_label.int2str(int(v))
        out.append(label_key(v))
    return out


def split_tag(tag: str) -> Optional[tuple[str, str]]:
    """("B", "PER") for "B-PER"; ("O", "") for "O"; None for a tag of no chunk scheme ("NN").
    The type is stripped of dashes, as seqeval reads it ("B-X-" and "B-X" are one type)."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[0] in "BIES" and tag[1] == "-" and tag[2:].strip("-"):
        return tag[0], tag[2:].strip("-")
    return None


def to_iob2(tags_lists: Sequence[Sequence[str]]) -> tuple[list[list[str]], int]:
    """IOB1 → IOB2: an I-X that follows neither B-X nor I-X starts an entity, so becomes B-X.
    Returns (the tags, how many were rewritten); tags of other forms pass unchanged."""
    out, changed = [], 0
    for tags in tags_lists:
        fixed, before = [], ("O", "")
        for tag in tags:
            parts = split_tag(tag)
            if parts and parts[0] == "I" and before not in (("B", parts[1]), ("I", parts[1])):
                tag, changed = "B-" + tag[2:], changed + 1
            fixed.append(tag)
            before = parts or ("O", "")
        out.append(fixed)
    return out, changed


def _repair_iob1(tags: list[list[str]], where: str) -> list[list[str]]:
    """IOB1 tags (only O, B-X, I-X, some entities starting with I-) rewritten as IOB2."""
    names = tag_names(tags)
    parts = [split_tag(name) for name in names]
    if not all(p and p[0] in "OBI" for p in parts) or all(p[0] == "O" for p in parts):
        return tags
    repaired, changed = to_iob2(tags)
    if changed:
        log.warning("%s: %d %s with I- (IOB1 tagging); rewritten as B- (IOB2) so that "
                    "strict span scores count them", where, changed,
                    "entity starts" if changed == 1 else "entities start")
    return repaired


def tag_names(tags_lists: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The label map: every tag, sorted, "O" first (so id 0 is "outside" when there is one)."""
    names = sorted({t for tags in tags_lists for t in tags})
    if "O" in names:
        names.remove("O")
        names.insert(0, "O")
    return tuple(names)


# -- encode ------------------------------------------------------------------------------------

def word_pieces(tok, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Piece ids of every word of every sentence: [sentence][word] → ids. A word that
    normalises to nothing (a control character, an empty string) becomes one [UNK], so that
    it still has a position to be predicted at."""
    old_truncation, old_padding = tok.truncation, tok.padding
    try:  # set per call and restored: the Tokenizer object is shared, its settings are global
        tok.no_truncation()
        tok.no_padding()
        encodings = tok.encode_batch([list(s) for s in sentences], is_pretokenized=True,
                                     add_special_tokens=False)
    finally:
        _restore(tok, old_truncation, old_padding)
    unk = tok.token_to_id("[UNK]")
    out = []
    for sentence, encoding in zip(sentences, encodings):
        pieces = [[] for _ in sentence]
        for piece, word in zip(encoding.ids, encoding.word_ids):
            pieces[word].append(piece)
        out.append([p or [unk] for p in pieces])
    return out


def encode(tok, sentences: Sequence[Sequence[str]], max_seq_length: int,
           tags: Optional[Sequence[Sequence[str]]] = None, names: Optional[Sequence[str]] = None,
           where: str = "") -> dict[str, np.ndarray]:
    """Sentences of words → windows of [CLS] pieces [SEP], padded to max_seq_length.

    A word's label sits on its first piece; other pieces, [CLS], [SEP] and padding get -100.
    A sentence whose pieces exceed max_seq_length - 2 fills several windows, split between words
    (no overlap): each word is in exactly one window. A single word longer than
    max_seq_length - 2 pieces keeps only its first max_seq_length - 2 (its label is on the first).
    Empty sentences get no window. names: the label map (default: tag_names(tags)).

    Returns, with N windows and L = max_seq_length, all int32:
      input_ids, token_type_ids (zeros), attention_mask: (N, L)
      labels: (N, L) tag ids at first pieces, -100 elsewhere (only when `tags` is given)
      word_index: (N, L) the word's index in its sentence at first pieces, -1 elsewhere
      sentence_index: (N,) the sentence each window belongs to
    """
    if (not isinstance(max_seq_length, int) or isinstance(max_seq_length, bool)
            or max_seq_length < 3):
        raise BertJaxError(f"max_seq_length: expected an integer ≥ 3 ([CLS] word [SEP]), got "
                           f"{max_seq_length!r}")
    label_of = None
    if tags is not None:
        if len(tags) != len(sentences):
            raise BertJaxError(f"{where}: {len(tags)} tag lists for {len(sentences)} sentences")
        names = tag_names(tags) if names is None else names
        label_of = {name: i for i, name in enumerate(names)}
        for row, (words, labels) in enumerate(zip(sentences, tags), 1):
            if len(words) != len(labels):
                raise BertJaxError(f"{where}: row {row}: {len(words)} words but {len(labels)} "
                                   f"tags; expected one tag per word")
            for tag in labels:
                if tag not in label_of:
                    raise BertJaxError(f"{where}: row {row}: tag {tag!r} is not one of the "
                                       f"training tags ({', '.join(names)})")
    budget = max_seq_length - 2
    windows = []  # (sentence, first word, [pieces of each word in it])
    for s, pieces in enumerate(word_pieces(tok, sentences)):
        start, current, size = 0, [], 0
        for w, word in enumerate(pieces):
            word = word[:budget]
            if current and size + len(word) > budget:
                windows.append((s, start, current))
                start, current, size = w, [], 0
            current.append(word)
            size += len(word)
        if current:
            windows.append((s, start, current))

    n = len(windows)
    input_ids = np.full((n, max_seq_length), tok.token_to_id("[PAD]"), np.int32)
    attention_mask = np.zeros((n, max_seq_length), np.int32)
    word_index = np.full((n, max_seq_length), -1, np.int32)
    labels = np.full((n, max_seq_length), IGNORE, np.int32)
    sentence_index = np.zeros((n,), np.int32)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    for i, (s, start, words) in enumerate(windows):
        ids = [cls] + [p for word in words for p in word] + [sep]
        input_ids[i, :len(ids)] = ids
        attention_mask[i, :len(ids)] = 1
        sentence_index[i] = s
        firsts = 1 + np.cumsum([0] + [len(word) for word in words[:-1]])
        word_index[i, firsts] = np.arange(start, start + len(words))
        if label_of is not None:
            labels[i, firsts] = [label_of[t] for t in tags[s][start:start + len(words)]]
    out = {"input_ids": input_ids, "token_type_ids": np.zeros_like(input_ids),
           "attention_mask": attention_mask, "word_index": word_index,
           "sentence_index": sentence_index}
    if label_of is not None:
        out["labels"] = labels
    return out


# -- decode ------------------------------------------------------------------------------------

def word_predictions(logits: np.ndarray, feats: dict, num_sentences: int,
                     lengths: Sequence[int]) -> list[np.ndarray]:
    """Window predictions → one (n_words,) int array of label ids per sentence.

    logits: (N, L, C) scores of encode's N windows (or (N, L) label ids already argmaxed);
    read at first-piece positions (feats' word_index ≥ 0). lengths: words per sentence.
    """
    word_index = np.asarray(feats["word_index"])
    sentence_index = np.asarray(feats["sentence_index"])
    logits = np.asarray(logits)
    if logits.shape[:2] != word_index.shape or logits.ndim not in (2, 3):
        raise BertJaxError(f"logits: shape {logits.shape}; expected (N, L, C) or (N, L) with "
                           f"(N, L) = {word_index.shape}, one row per window")
    if len(lengths) != num_sentences:
        raise BertJaxError(f"lengths: {len(lengths)} lengths for {num_sentences} sentences")
    predicted = logits.argmax(-1) if logits.ndim == 3 else logits
    lengths = np.asarray(lengths, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows, cols = np.nonzero(word_index >= 0)
    sentence = sentence_index[rows]
    word = word_index[rows, cols]
    if np.any(word >= lengths[sentence]):
        raise BertJaxError("word_index: points past a sentence's length; the features and "
                           "lengths do not belong together")
    flat = np.full(offsets[-1], -1, np.int64)
    seen = np.zeros(offsets[-1], np.int64)
    positions = offsets[sentence] + word
    flat[positions] = predicted[rows, cols]
    np.add.at(seen, positions, 1)
    if np.any(seen != 1):
        bad = int(np.flatnonzero(seen != 1)[0])
        s = int(np.searchsorted(offsets, bad, side="right") - 1)
        raise BertJaxError(f"word_index: word {bad - offsets[s] + 1} of sentence {s + 1} is "
                           f"predicted {int(seen[bad])} times; expected once")
    return [flat[offsets[s]:offsets[s + 1]].astype(np.int32) for s in range(num_sentences)]
