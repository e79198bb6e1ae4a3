"""Tokenizer: equal to transformers' BertTokenizerFast on the released vocab, training, errors."""

import glob
import os
import shutil

import pytest
from transformers import BertTokenizerFast

from bert_jax.data import tokenizer as tok_lib
from bert_jax.errors import BertJaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = sorted(glob.glob(os.path.join(ROOT, "data", "austen", "*.txt")))
MAX_LENGTH = 20  # short enough that many lines and most pairs are truncated
EXTRA_LINES = ["", "   ", "Café Ångström naïve façade", "東京 and 北京 are cities",
               "a [MASK] in [CLS] text [SEP]", "tab\tcontrol\x07chars\u200b here",
               "x" * 150 + " long word", "Mr. O'Brien's 3.5%-off deal—really?!"]


@pytest.fixture(scope="module")
def lines():
    out = [line.rstrip("\n") for path in AUSTEN for line in open(path, encoding="utf-8")]
    assert len(out) == 73422
    return out + EXTRA_LINES


@pytest.fixture(scope="module")
def reference(lines, minilm_dir, tmp_path_factory):
    """transformers' own tokenizer, built from vocab.txt alone (not from our tokenizer.json)."""
    vocab_dir = tmp_path_factory.mktemp("vocab")
    shutil.copy(os.path.join(minilm_dir, "vocab.txt"), vocab_dir)
    hf = BertTokenizerFast.from_pretrained(str(vocab_dir))
    assert len(hf) == 30522  # transformers 5 builds a 5-token vocab when given the file wrongly
    singles = hf(lines, max_length=MAX_LENGTH, truncation=True)
    pairs = hf(lines[:-1], lines[1:], max_length=MAX_LENGTH, truncation=True)
    return {k: singles[k] for k in singles}, {k: pairs[k] for k in pairs}


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer.json"])
def test_released_vocab_matches_bert_tokenizer_fast(name, lines, reference, minilm_dir):
    tokenizer = tok_lib.load(os.path.join(minilm_dir, name))
    assert tokenizer.get_vocab_size() == 30522
    singles, pairs = reference
    ours = tok_lib.encode_batch(tokenizer, lines, max_seq_length=MAX_LENGTH)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert ours[key] == singles[key], key
    assert sum(len(ids) == MAX_LENGTH for ids in ours["input_ids"]) > 1000  # truncation exercised
    ours = tok_lib.encode_batch(tokenizer, lines[:-1], lines[1:], max_seq_length=MAX_LENGTH)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert ours[key] == pairs[key], key
    assert sum(len(ids) == MAX_LENGTH for ids in ours["input_ids"]) > 30000
    assert tokenizer.truncation is None and tokenizer.padding is None  # settings restored


def test_encode_single_pair_and_padding(minilm_dir):
    tokenizer = tok_lib.load(minilm_dir)  # a directory: its tokenizer.json
    ids = tok_lib.special_token_ids(tokenizer)
    assert ids == {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    one = tok_lib.encode(tokenizer, "Emma Woodhouse, handsome, clever, and rich", max_seq_length=8)
    assert len(one["input_ids"]) == 8
    assert one["input_ids"][0] == 101 and one["input_ids"][-1] == 102
    assert set(one["token_type_ids"]) == {0} and set(one["attention_mask"]) == {1}
    pair = tok_lib.encode(tokenizer, "first segment here", "and the second one, much longer",
                          max_seq_length=10)
    assert len(pair["input_ids"]) == 10
    first_sep = pair["input_ids"].index(102)
    assert pair["token_type_ids"] == [0] * (first_sep + 1) + [1] * (10 - first_sep - 1)
    padded = tok_lib.encode_batch(tokenizer, ["short", "a much longer text than that"],
                                  ["b", "c"], max_seq_length=12, pad=True)
    assert padded["input_ids"].shape == (2, 12) and str(padded["input_ids"].dtype) == "int32"
    assert padded["attention_mask"][0].tolist() == [1] * 5 + [0] * 7
    assert padded["input_ids"][0, 5:].tolist() == [0] * 7
    assert padded["token_type_ids"][0].tolist() == [0, 0, 0, 1, 1] + [0] * 7


def test_train_tokenizer_uncased(tmp_path):
    trained = tok_lib.train_tokenizer(AUSTEN[:2], vocab_size=2000, out_dir=str(tmp_path))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / name).is_file()
    vocab = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(vocab) == trained.get_vocab_size() and 1500 < len(vocab) <= 2000
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(t.startswith("##") for t in vocab) and not any(t != t.lower() for t in vocab[5:])
    assert trained.normalizer.normalize_str("Café ÅNGSTRÖM") == "cafe angstrom"
    text, pair = "Emma Woodhouse, handsome, clever, and rich.", "She was the youngest."
    expected = tok_lib.encode(trained, text, pair)
    assert expected["input_ids"][0] == 2 and expected["input_ids"][-1] == 3
    for path in ("vocab.txt", "tokenizer.json"):
        assert tok_lib.encode(tok_lib.load(str(tmp_path / path)), text, pair) == expected
    hf = BertTokenizerFast.from_pretrained(str(tmp_path))  # the directory works in transformers
    assert len(hf) == len(vocab)
    assert {k: v for k, v in hf(text, pair).items()} == expected
    lookup = tok_lib.continuation_lookup(trained)
    assert lookup.shape == (len(vocab),)
    assert lookup.sum() == sum(t.startswith("##") for t in vocab)


def test_train_tokenizer_cased(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Apple apple Café Zebra zebra.\n" * 50, encoding="utf-8")
    trained = tok_lib.train_tokenizer(str(corpus), vocab_size=100, out_dir=str(tmp_path / "tok"),
                                      lowercase=False)
    assert trained.token_to_id("Apple") is not None and trained.token_to_id("Café") is not None
    reloaded = tok_lib.load(str(tmp_path / "tok" / "vocab.txt"))  # detected as cased
    assert tok_lib.encode(reloaded, "Apple Café")["input_ids"] == tok_lib.encode(
        trained, "Apple Café")["input_ids"]
    assert reloaded.normalizer.normalize_str("Café") == "Café"


def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\n \t\n", encoding="utf-8")
    return [(str(tmp_path / "missing.txt"), "missing.txt: file not found"),
            (str(tmp_path / "nothing-*.txt"), "nothing-*.txt: no file matches"),
            (str(empty), "empty.txt: file is empty"),
            (str(latin1), "latin1.txt: not UTF-8"),
            (str(blank), "blank.txt: file contains no text"),
            (str(tmp_path), "is a directory")]


def test_bad_training_files_give_one_clear_line(tmp_path):
    for files, message in _bad_inputs(tmp_path):
        with pytest.raises(BertJaxError, match=message.replace("*", r"\*")) as error:
            tok_lib.train_tokenizer(files, vocab_size=100, out_dir=str(tmp_path / "out"))
        assert "\n" not in str(error.value)
    with pytest.raises(BertJaxError, match="vocab_size"):
        tok_lib.train_tokenizer(AUSTEN[0], vocab_size=3, out_dir=str(tmp_path / "out"))


def test_bad_vocab_files(tmp_path, minilm_dir):
    released = open(os.path.join(minilm_dir, "vocab.txt"), encoding="utf-8").read().split("\n")
    no_mask = tmp_path / "vocab.txt"
    no_mask.write_text("\n".join(t for t in released if t != "[MASK]"), encoding="utf-8")
    with pytest.raises(BertJaxError, match=r"vocab\.txt: vocabulary has no \[MASK\] token") as e:
        tok_lib.load(str(no_mask))
    assert "\n" not in str(e.value)
    latin1 = tmp_path / "latin1-vocab.txt"
    latin1.write_bytes(b"[PAD]\ncaf\xe9\n")
    with pytest.raises(BertJaxError, match="latin1-vocab.txt: not UTF-8"):
        tok_lib.load(str(latin1))
    with pytest.raises(BertJaxError, match="nope.json: tokenizer file not found"):
        tok_lib.load(str(tmp_path / "nope.json"))
    garbage = tmp_path / "tokenizer.json"
    garbage.write_text("{not json", encoding="utf-8")
    with pytest.raises(BertJaxError, match="tokenizer.json: not a tokenizers JSON file"):
        tok_lib.load(str(garbage))


def test_a_text_far_beyond_max_seq_length_is_cut_first_with_the_same_tokens(lines, minilm_dir):
    """data/long_texts.py: encoding a cut text gives the tokens (and truncation counts) the
    whole text gives, singles and pairs, with long [UNK] words and accents near the cuts."""
    tok = tok_lib.load(minilm_dir)
    prose = " ".join(lines[:400])  # ~30,000 characters
    unk = " ".join(["x" * 150] * 200)  # a token per 151 characters: the prefix must grow
    accents = "e\u0301" * 1500 + " " + prose  # a cut between a letter and its accent
    dots = "." * 2500  # punctuation: a token per character, no space
    # one word of 30,000 letters and digits (precomposed accents, a capital whose lowercase is
    # two characters) between words: shortened to 101 characters, still one [UNK]
    giant = "a word " + ("9f3cÉİ" * 5000) + "\u0301 then more" + " and text" * 300
    cjk = "東京" * 3000 + " " + prose[:500]  # letters, but a word each: never shortened
    texts = [prose, unk, accents, dots, "short text", prose[:2500], giant, cjk]
    # (the reference, whole pairs, costs the tokenizer a window of each for each of the other)
    pairs = [unk, prose[:3000], "short", prose[:3000], dots, prose[:2600], giant, prose[:2000]]

    def whole(texts, pairs):
        tok.enable_truncation(MAX_LENGTH, strategy="longest_first")
        try:
            inputs = texts if pairs is None else list(zip(texts, pairs))
            return [e.ids for e in tok.encode_batch(inputs)]
        finally:
            tok.no_truncation()
    for second in (None, pairs):
        assert tok_lib.encode_batch(tok, texts, second, MAX_LENGTH)["input_ids"] == \
            whole(texts, second)
        full = tok_lib.encode_batch(tok, texts, second, None)["input_ids"]
        assert tok_lib.count_longer(tok, texts, second, MAX_LENGTH) == sum(
            len(row) > MAX_LENGTH for row in full)
    from bert_jax.data import long_texts
    cut, _ = long_texts.cut_texts(tok, texts, None, MAX_LENGTH)
    assert len(cut[0]) < len(prose) and len(cut[3]) < len(dots)  # the cut did happen
    assert len(cut[6]) < 4_000 and " " + "9f3cÉİ" * 16 + "9f3cÉ\u0301 " in cut[6]  # 101 kept
    assert len(cut[7]) > 102 and texts[7].startswith(cut[7])  # a prefix: no run shortened


def test_training_files_are_checked_a_block_at_a_time(tmp_path, monkeypatch):
    """check_text (what train_tokenizer checks before the trainer streams the files) agrees with
    read_text, with characters and the BOM split across blocks of 4 bytes."""
    from bert_jax.data import text_files
    monkeypatch.setattr(text_files, "_BLOCK", 4)
    cases = {"ok.txt": "\ufeffcafé Ångström 東京\n".encode(), "bad.txt": "caf\u00e9 ok".encode()
             + b"\xe9 x", "cut.txt": "abcé".encode()[:-1], "blank.txt": b" \n\t \n"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        try:
            text_files.read_text(str(tmp_path / name))
            expected = None
        except BertJaxError as e:
            expected = str(e)
        try:
            text_files.check_text(str(tmp_path / name))
            got = None
        except BertJaxError as e:
            got = str(e)
        assert got == expected, name
    assert expected is not None and "no text" in expected  # the blank file was refused
