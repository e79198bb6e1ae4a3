"""BERT's WordPiece tokenizer on Hugging Face `tokenizers`: train one, load a released one, encode.

Everything returns a plain `tokenizers.Tokenizer` set up exactly as BERT's (BERT normaliser and
pre-tokenizer, `##` continuation pieces, [CLS] A [SEP] B [SEP] with segment ids 0/1), so
encodings match transformers' BertTokenizerFast token for token.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence, Union

import numpy as np
from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

from bert_jax.data import long_texts
from bert_jax.data.text_files import check_text, read_text, resolve_files
from bert_jax.errors import BertJaxError

# Order fixes their ids in a trained vocabulary: [PAD] = 0 as BertConfig.pad_token_id expects.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION_PREFIX = "##"


# -- train / load ----------------------------------------------------------------------------

def train_tokenizer(files: Union[str, list[str]], vocab_size: int, out_dir: str,
                    lowercase: bool = True, min_frequency: int = 2) -> Tokenizer:
    """Train a WordPiece vocabulary on text files; write vocab.txt, tokenizer.json and a
    tokenizer_config.json (so transformers can load `out_dir` too) into `out_dir`.

    lowercase=True is BERT uncased (lowercase + strip accents); False keeps case and accents.
    Not bit-reproducible: the `tokenizers` trainer breaks frequency ties in hash-map order, so
    two trainings can differ in a few tokens and ids. Runs therefore save their vocabulary
    (pretraining: WORKDIR/vocab, reused on resume); pass it back to repeat a run exactly.
    """
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise BertJaxError(f"vocab_size: expected an integer > {len(SPECIAL_TOKENS)}, got "
                           f"{vocab_size!r}")
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise BertJaxError(f"min_frequency: expected an integer ≥ 1, got {min_frequency!r}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):  # refused before training
        raise BertJaxError(f"{out_dir}: exists and is not a directory")
    paths = resolve_files(files)
    for path in paths:  # the Rust reader would fail on bad bytes without naming the file
        check_text(path)  # a block at a time: the trainer itself streams the lines
    tokenizer = _bert_tokenizer(models.WordPiece(unk_token="[UNK]",
                                                 continuing_subword_prefix=CONTINUATION_PREFIX),
                                lowercase)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS),
                                        continuing_subword_prefix=CONTINUATION_PREFIX)
    tokenizer.train(paths, trainer)
    _set_post_processor(tokenizer, "trained tokenizer")
    save(tokenizer, out_dir)
    return tokenizer


def save(tokenizer: Tokenizer, out_dir: str) -> list[str]:
    """Write tokenizer.json, vocab.txt and a tokenizer_config.json (so transformers can load
    `out_dir` too); returns the paths written. Each file replaces its old copy in one rename: a
    run killed mid-write (a resumed pretraining rewrites its vocabulary) leaves a readable one."""
    os.makedirs(out_dir, exist_ok=True)
    lowercase = bool(getattr(tokenizer.normalizer, "lowercase", False))
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase,
              "strip_accents": None, "tokenize_chinese_chars": True, "model_max_length": 512,
              "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
              "cls_token": "[CLS]", "mask_token": "[MASK]"}
    writers = {"tokenizer.json": tokenizer.save,
               "vocab.txt": lambda path: _write_text(path, "".join(t + "\n" for t, _ in vocab)),
               "tokenizer_config.json": lambda path: _write_text(path, json.dumps(config,
                                                                                  indent=2))}
    paths = []
    for name, write in writers.items():
        path = os.path.join(out_dir, name)
        tmp = os.path.join(out_dir, f".{name}.tmp-{os.getpid()}")
        write(tmp)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def load(path: str, lowercase: Optional[bool] = None) -> Tokenizer:
    """Load a released vocab.txt or tokenizer.json (or a directory holding one) as BERT's tokenizer.

    For vocab.txt, `lowercase` None means: uncased unless the vocabulary has upper-case tokens
    (bert-base-cased has, bert-base-uncased has not). A tokenizer.json keeps its own normaliser.
    Truncation and padding are cleared: the encode helpers below set them per call.
    """
    if os.path.isdir(path):
        return load(vocab_path(path), lowercase)
    if not os.path.isfile(path):
        raise BertJaxError(f"{path}: tokenizer file not found")
    if path.endswith(".json"):
        try:
            tokenizer = Tokenizer.from_file(path)
        except Exception as e:  # the Rust error names no file
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise BertJaxError(f"{path}: not a tokenizers JSON file ({reason})") from None
        if not isinstance(tokenizer.model, models.WordPiece):
            raise BertJaxError(f"{path}: model is {type(tokenizer.model).__name__}, BERT needs "
                               f"WordPiece")
        tokenizer.no_truncation()
        tokenizer.no_padding()
    else:
        vocab = _read_vocab(path)
        _check_special_tokens(vocab.get, path)  # before add_special_tokens could invent them
        if lowercase is None:
            lowercase = not any(t.lower() != t for t in vocab if not t.startswith("["))
        tokenizer = _bert_tokenizer(
            models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100), lowercase)
        tokenizer.add_special_tokens(list(SPECIAL_TOKENS))  # as transformers: never split them
    _check_special_tokens(tokenizer.token_to_id, path)
    if tokenizer.post_processor is None:
        _set_post_processor(tokenizer, path)
    return tokenizer


def vocab_path(path: str) -> str:
    """The file `load(path)` reads: a directory's tokenizer.json, else its vocab.txt."""
    if not os.path.isdir(path):
        return path
    for name in ("tokenizer.json", "vocab.txt"):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    raise BertJaxError(f"{path}: no tokenizer.json or vocab.txt in this directory")


def special_token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """{"[PAD]": id, "[UNK]": id, "[CLS]": id, "[SEP]": id, "[MASK]": id}."""
    _check_special_tokens(tokenizer.token_to_id, "tokenizer")
    return {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}


def continuation_lookup(tokenizer: Tokenizer) -> np.ndarray:
    """(V,) bool, True for `##` pieces: `lookup[input_ids]` tells whole-word masking which
    tokens continue the word before them."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    lookup = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for token, i in vocab.items():
        lookup[i] = token.startswith(CONTINUATION_PREFIX) and len(token) > len(CONTINUATION_PREFIX)
    return lookup


# -- encode ------------------------------------------------------------------------------------

def encode(tokenizer: Tokenizer, text: str, pair: Optional[str] = None,
           max_seq_length: int = 512) -> dict[str, list[int]]:
    """One text or pair → input_ids, token_type_ids, attention_mask, truncated longest-first."""
    batch = encode_batch(tokenizer, [text], None if pair is None else [pair], max_seq_length)
    return {k: v[0] for k, v in batch.items()}


def encode_batch(tokenizer: Tokenizer, texts: Sequence[str],
                 pairs: Optional[Sequence[str]] = None, max_seq_length: Optional[int] = 512,
                 pad: bool = False) -> dict:
    """Texts (and their pairs) → {input_ids, token_type_ids, attention_mask}.

    Lists of lists, each truncated to `max_seq_length` by trimming the longer segment first (as
    BertTokenizerFast); max_seq_length None: not truncated. pad=True pads with [PAD] to
    `max_seq_length` and returns (B, max_seq_length) int32 arrays, attention_mask 0 on padding.
    """
    if pairs is not None and len(pairs) != len(texts):
        raise BertJaxError(f"pairs: {len(pairs)} second segments for {len(texts)} texts")
    if (max_seq_length is not None or pad) and (
            not isinstance(max_seq_length, int) or max_seq_length < (3 if pairs is None else 4)):
        raise BertJaxError(f"max_seq_length: too small for [CLS]/[SEP] tokens, got "
                           f"{max_seq_length!r}")
    old_truncation, old_padding = tokenizer.truncation, tokenizer.padding
    try:  # set per call and restored: the Tokenizer object is shared, its settings are global
        if max_seq_length is not None:  # memory follows max_seq_length, not the longest field
            tokenizer.no_truncation()
            tokenizer.no_padding()
            texts, pairs = long_texts.cut_texts(tokenizer, texts, pairs, max_seq_length)
        if max_seq_length is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(max_seq_length, strategy="longest_first")
        if pad:
            tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]",
                                     length=max_seq_length)
        else:
            tokenizer.no_padding()
        inputs = list(texts) if pairs is None else list(zip(texts, pairs))
        encodings = tokenizer.encode_batch(inputs)
    finally:
        _restore(tokenizer, old_truncation, old_padding)
    out = {"input_ids": [e.ids for e in encodings],
           "token_type_ids": [e.type_ids for e in encodings],
           "attention_mask": [e.attention_mask for e in encodings]}
    if pad:
        out = {k: np.asarray(v, dtype=np.int32).reshape(len(encodings), max_seq_length)
               for k, v in out.items()}
    return out


def count_longer(tokenizer: Tokenizer, texts: Sequence[str],
                 pairs: Optional[Sequence[str]] = None, max_seq_length: int = 512) -> int:
    """How many texts (with their pairs) have more than `max_seq_length` tokens, [CLS] and
    [SEP]s included: the ones encode_batch truncates, for a warning that counts them."""
    old_truncation, old_padding = tokenizer.truncation, tokenizer.padding
    try:  # a cut text keeps more than max_seq_length tokens: it still counts as longer
        tokenizer.no_truncation()
        tokenizer.no_padding()
        texts, pairs = long_texts.cut_texts(tokenizer, texts, pairs, max_seq_length)
    finally:
        _restore(tokenizer, old_truncation, old_padding)
    ids = encode_batch(tokenizer, texts, pairs, None)["input_ids"]
    return sum(len(row) > max_seq_length for row in ids)


def check_fits(tokenizer: Tokenizer, vocab_size: int, source: str) -> None:
    """Refuse a vocabulary with ids past the model's embedding table (JAX would clamp them
    silently to the last row); a smaller vocabulary than the table is fine (padded tables)."""
    size = max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1
    if size > vocab_size:
        raise BertJaxError(f"{source}: {size} tokens, more than the model's vocab_size "
                           f"({vocab_size}); the vocabulary and config.json do not belong "
                           f"together")


# -- helpers -----------------------------------------------------------------------------------

def _bert_tokenizer(model, lowercase: bool) -> Tokenizer:
    tokenizer = Tokenizer(model)
    # strip_accents=None follows `lowercase`, as in BERT: uncased strips accents, cased keeps them
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=None, lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    return tokenizer


def _set_post_processor(tokenizer: Tokenizer, source: str) -> None:
    _check_special_tokens(tokenizer.token_to_id, source)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A:0 [SEP]:0", pair="[CLS] $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def _check_special_tokens(token_to_id, source: str) -> None:
    for token in SPECIAL_TOKENS:
        if token_to_id(token) is None:
            raise BertJaxError(f"{source}: vocabulary has no {token} token (BERT needs "
                               f"{' '.join(SPECIAL_TOKENS)})")


def _read_vocab(path: str) -> dict[str, int]:
    """vocab.txt: one token a line, id = line number (as BERT's load_vocab)."""
    lines = read_text(path).split("\n")
    if lines[-1] == "":
        lines.pop()
    # a duplicated token keeps its last id, as transformers' load_vocab does
    return {line.rstrip("\r"): i for i, line in enumerate(lines)}


def _restore(tokenizer: Tokenizer, truncation: Optional[dict], padding: Optional[dict]) -> None:
    if truncation is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(**truncation)
    if padding is None:
        tokenizer.no_padding()
    else:
        padding = dict(padding)
        length = padding.pop("length", None)
        tokenizer.enable_padding(length=length, **padding)
