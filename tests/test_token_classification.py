"""Token classification data (CoNLL reading, first-piece alignment, windows) and entity scores
against seqeval."""

import json
import logging

import datasets
import numpy as np
import pytest

from bert_jax.tasks.token_classification import data as tc
from bert_jax.data.tokenizer import load
from bert_jax.errors import BertJaxError
from bert_jax.tasks.token_classification import scores as es


@pytest.fixture(scope="module")
def tok(minilm_dir):
    return load(minilm_dir)


# -- reading -----------------------------------------------------------------------------------

CONLL = ("-DOCSTART- -X- -X- O\r\n\r\n"
         "EU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\nGerman JJ B-NP B-MISC\r\n\r\n"
         "Peter NNP B-NP B-PER\r\nBlackburn NNP I-NP I-PER\r\n\r\n"
         "-DOCSTART- -X- -X- O\r\n"
         "BRUSSELS\tNNP\tB-NP\tB-LOC\r\n\r\n\r\n\r\n")


def test_read_conll_docstart_columns_crlf_trailing_blanks(tmp_path):
    path = tmp_path / "train.conll"
    path.write_bytes(CONLL.encode())
    sentences, tags = tc.read_conll(str(path))
    assert sentences == [["EU", "rejects", "German"], ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert tags == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"], ["B-LOC"]]


def test_read_conll_tag_column_choice(tmp_path):
    """CoNLL-2003's columns: token POS chunk NER; the last (NER) unless a column is named."""
    path = tmp_path / "train.conll"
    path.write_bytes(CONLL.encode())
    assert tc.read_conll(str(path), column=1)[1] == [["NNP", "VBZ", "JJ"], ["NNP", "NNP"],
                                                     ["NNP"]]
    assert tc.read_conll(str(path), column=2)[1][1] == ["B-NP", "I-NP"]
    assert tc.read_conll(str(path), column=-1) == tc.read_conll(str(path))
    splits = tc.load_splits(files={"train": str(path)}, conll_column=1)
    assert splits["train"][2][0] == ["NNP", "VBZ", "JJ"]
    for column in (4, 0, -4):  # past the last column, the token itself, before the token
        with pytest.raises(BertJaxError, match=rf"train\.conll: line \d+: no tag column {column} "
                                               r"\(the line has 4 columns"):
            tc.read_conll(str(path), column=column)


def test_read_conll_without_final_newline_two_columns(tmp_path):
    path = tmp_path / "pos.txt"
    path.write_text("The DT\nend NN\n\nHi UH", encoding="utf-8")
    assert tc.read_conll(str(path)) == ([["The", "end"], ["Hi"]], [["DT", "NN"], ["UH"]])


def test_read_conll_refuses_one_column_line(tmp_path):
    path = tmp_path / "bad.iob"
    path.write_text("EU B-ORG\nrejects\n", encoding="utf-8")
    with pytest.raises(BertJaxError, match=r"bad\.iob: line 2: .*one column 'rejects'"):
        tc.read_conll(str(path))
    (tmp_path / "blank.conll").write_text("\n\n-DOCSTART- O\n", encoding="utf-8")
    with pytest.raises(BertJaxError, match="blank.conll: no sentences"):
        tc.read_conll(str(tmp_path / "blank.conll"))


def test_load_splits_conll_and_jsonl(tmp_path, caplog):
    (tmp_path / "train.bio").write_bytes(CONLL.encode())
    rows = [{"tokens": ["a", "b"], "tags": [1, 0]}, {"tokens": [], "tags": []},
            {"tokens": ["c"], "tags": [2]}, {"tokens": None, "tags": None}]
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.WARNING):
        splits = tc.load_splits("", "", {"train": str(tmp_path / "train.bio"),
                                         "validation": str(tmp_path / "dev.jsonl")})
    where, sentences, tags = splits["validation"]
    assert where.endswith("dev.jsonl")
    assert sentences == [["a", "b"], ["c"]] and tags == [["1", "0"], ["2"]]  # ints as strings
    assert "skipped 2 of 4 rows with no tokens" in caplog.text
    assert splits["train"][1][1] == ["Peter", "Blackburn"]


def test_load_splits_class_label_names_parquet_and_hub(tmp_path, monkeypatch):
    features = datasets.Features({
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-PER", "I-PER"]))})
    table = datasets.Dataset.from_dict({"tokens": [["Peter", "Blackburn", "spoke"]],
                                        "ner_tags": [[1, 2, 0]]}, features=features)
    table.to_parquet(str(tmp_path / "t.parquet"))
    got = tc.load_splits(files={"train": str(tmp_path / "t.parquet")}, tags_column="ner_tags")
    assert got["train"][2] == [["B-PER", "I-PER", "O"]]

    loaded = datasets.DatasetDict({"train": table, "test": table})
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None: loaded)
    got = tc.load_splits("conll2003", "", {}, tags_column="ner_tags")
    assert set(got) == {"train", "test"} and got["test"][0] == "conll2003/test"
    assert got["test"][1:] == ([["Peter", "Blackburn", "spoke"]], [["B-PER", "I-PER", "O"]])


def test_load_splits_refusals(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"words": ["a"], "tags": ["O"]}) + "\n")
    with pytest.raises(BertJaxError, match=r"x\.jsonl: no column 'tokens'; columns present: "
                                           r"words, tags"):
        tc.load_splits(files={"train": str(path)})
    path.write_text(json.dumps({"tokens": ["a"], "tags": ["O"]}) + "\n" +
                    json.dumps({"tokens": ["a", "b", "c"], "tags": ["O", "O"]}) + "\n")
    with pytest.raises(BertJaxError, match=r"x\.jsonl: row 2: 3 tokens but 2 tags"):
        tc.load_splits(files={"train": str(path)})
    path.write_text(json.dumps({"tokens": "a b", "tags": ["O", "O"]}) + "\n")
    with pytest.raises(BertJaxError, match=r"row 1: column 'tokens' is str; expected a list"):
        tc.load_splits(files={"train": str(path)})


def test_iob1_rewritten_as_iob2(tmp_path, caplog):
    path = tmp_path / "eng.train"  # the original CoNLL-2003 release tags entities IOB1
    path.write_text("U.N. I-ORG\nofficial O\nEkeus I-PER\nI-PER I-PER\nheads O\n"
                    "Kim I-PER\nBob B-PER\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        tags = tc.load_splits(files={"train": str(path)})["train"][2]
    assert tags == [["B-ORG", "O", "B-PER", "I-PER", "O", "B-PER", "B-PER"]]
    assert "3 entities start with I-" in caplog.text
    assert tc.load_splits(files={"train": str(path)}, repair_iob1=False)["train"][2][0][0] \
        == "I-ORG"


def test_tag_names():
    assert tc.tag_names([["B-PER", "O"], ["I-PER", "B-LOC"]]) == ("O", "B-LOC", "B-PER", "I-PER")
    assert tc.tag_names([["NN", "DT"], ["VB"]]) == ("DT", "NN", "VB")


# -- encoding ----------------------------------------------------------------------------------

def test_first_piece_alignment_matches_transformers_word_ids(tok, minilm_dir):
    from transformers import BertTokenizerFast
    hf = BertTokenizerFast.from_pretrained(minilm_dir)
    assert hf.vocab_size == tok.get_vocab_size() == 30522
    words = ["Hugging", "Face", "tokenization", "of", "Wolfsschanze", "don't", "U.S.", "!"]
    tags = ["B-ORG", "I-ORG", "O", "O", "B-LOC", "O", "B-LOC", "O"]
    names = tc.tag_names([tags])
    feats = tc.encode(tok, [words], 32, [tags], names, "train")
    hf_enc = hf(words, is_split_into_words=True, padding="max_length", max_length=32)
    assert feats["input_ids"][0].tolist() == hf_enc["input_ids"]
    assert feats["attention_mask"][0].tolist() == hf_enc["attention_mask"]
    word_ids = hf_enc.word_ids()
    firsts = [i for i, w in enumerate(word_ids) if w is not None and
              (i == 0 or word_ids[i - 1] != w)]
    assert len(firsts) == len(words) and len(set(word_ids) - {None}) == len(words)
    assert np.flatnonzero(feats["word_index"][0] >= 0).tolist() == firsts
    assert feats["word_index"][0, firsts].tolist() == list(range(len(words)))
    labels = feats["labels"][0]
    assert labels[firsts].tolist() == [names.index(t) for t in tags]
    assert (np.delete(labels, firsts) == -100).all()
    assert len(firsts) < int(feats["attention_mask"][0].sum()) - 2  # some words split
    for key in ("input_ids", "token_type_ids", "attention_mask", "labels", "word_index"):
        assert feats[key].dtype == np.int32 and feats[key].shape == (1, 32)
    assert feats["sentence_index"].tolist() == [0] and not feats["token_type_ids"].any()


def test_long_sentences_split_into_windows_round_trip(tok):
    rng = np.random.default_rng(0)
    vocabulary = ["the", "tokenization", "Wolfsschanze", "Berlin", "of", "unbelievably", ",",
                  "x", "antidisestablishmentarianism"]
    names = ("O", "B-LOC", "I-LOC", "B-PER")
    sentences, tags = [], []
    for n in [1, 3, 40, 7, 100, 25, 0, 61]:
        sentences.append([str(rng.choice(vocabulary)) for _ in range(n)])
        tags.append([str(rng.choice(names)) for _ in range(n)])
    max_length = 16
    feats = tc.encode(tok, sentences, max_length, tags, names, "train")
    n_windows = len(feats["sentence_index"])
    assert n_windows > len(sentences)  # long ones were split
    assert feats["input_ids"].shape == (n_windows, max_length)
    assert 6 not in feats["sentence_index"]  # the empty sentence has no window
    sep = tok.token_to_id("[SEP]")
    for row in range(n_windows):  # every window ends in [SEP] inside max_length
        length = int(feats["attention_mask"][row].sum())
        assert length <= max_length and feats["input_ids"][row, length - 1] == sep
        assert feats["input_ids"][row, 0] == tok.token_to_id("[CLS]")
    # every word labelled exactly once, in order, with its own tag
    for s, (words, word_tags) in enumerate(zip(sentences, tags)):
        rows = np.flatnonzero(feats["sentence_index"] == s)
        index = feats["word_index"][rows]
        assert sorted(index[index >= 0].tolist()) == list(range(len(words)))
        assert feats["labels"][rows][index >= 0].tolist() == [names.index(t) for t in word_tags]
    one_hot = np.eye(len(names))[np.maximum(feats["labels"], 0)]
    preds = tc.word_predictions(one_hot, feats, len(sentences), [len(s) for s in sentences])
    assert [p.tolist() for p in preds] == [[names.index(t) for t in ts] for ts in tags]
    assert [p.tolist() for p in tc.word_predictions(np.maximum(feats["labels"], 0), feats,
                                                     len(sentences),
                                                     [len(s) for s in sentences])] == \
        [p.tolist() for p in preds]  # (N, L) ids accepted too


def test_word_longer_than_window_and_zero_piece_words(tok):
    unk = tok.token_to_id("[UNK]")
    words = ["a", "tokenization" * 3, "\x00", "", "b"]
    pieces = tc.word_pieces(tok, [words])[0]
    assert len(pieces[1]) > 4 and pieces[2] == [unk] and pieces[3] == [unk]
    feats = tc.encode(tok, [words], 6, [["O", "B-X", "O", "I-X", "O"]], where="train")
    # budget 4: [a] | [token ##ization token ##ization] (cut) | [UNK UNK b]
    assert feats["input_ids"].shape == (3, 6)
    assert feats["input_ids"][1, 1:5].tolist() == pieces[1][:4]
    assert feats["input_ids"][2, 1:4].tolist() == [unk, unk] + pieces[4]
    assert (feats["word_index"][1] >= 0).sum() == 1
    preds = tc.word_predictions(np.maximum(feats["labels"], 0), feats, 1, [5])
    assert preds[0].tolist() == [0, 1, 0, 2, 0]  # names O, B-X, I-X


def test_encode_restores_tokenizer_settings_and_needs_no_tags(tok):
    tok.enable_truncation(7)
    try:
        feats = tc.encode(tok, [["Hello", "world"]] * 3, 8)
        assert tok.truncation["max_length"] == 7 and tok.padding is None
    finally:
        tok.no_truncation()
    assert "labels" not in feats and feats["input_ids"].shape == (3, 8)


def test_encode_refusals(tok):
    with pytest.raises(BertJaxError, match=r"validation: row 2: tag 'B-FOO' is not one of the "
                                           r"training tags \(O, B-X\)"):
        tc.encode(tok, [["a"], ["b"]], 8, [["O"], ["B-FOO"]], ("O", "B-X"), "validation")
    with pytest.raises(BertJaxError, match=r"train: row 1: 2 words but 1 tags"):
        tc.encode(tok, [["a", "b"]], 8, [["O"]], ("O",), "train")
    with pytest.raises(BertJaxError, match="max_seq_length: expected an integer ≥ 3"):
        tc.encode(tok, [["a"]], 2)
    feats = tc.encode(tok, [["a"]], 8)
    with pytest.raises(BertJaxError, match=r"logits: shape \(1, 7, 3\)"):
        tc.word_predictions(np.zeros((1, 7, 3)), feats, 1, [1])
    with pytest.raises(BertJaxError, match="word 2 of sentence 1 is predicted 0 times"):
        tc.word_predictions(np.zeros((1, 8, 3)), feats, 1, [2])


# -- scores ------------------------------------------------------------------------------------

def test_chunk_scheme():
    assert es.chunk_scheme(("O", "B-PER", "I-PER", "B-LOC", "I-LOC")) == "IOB2"
    assert es.chunk_scheme(("B-NP", "I-NP", "B-VP")) == "IOB2"
    assert es.chunk_scheme(("O", "B-PER", "I-PER", "E-PER", "S-PER", "S-LOC")) == "IOBES"
    assert es.chunk_scheme(("DT", "NN", "VB", "O")) is None  # POS
    assert es.chunk_scheme(("O",)) is None and es.chunk_scheme(()) is None
    assert es.chunk_scheme(("O", "B-", "I-X")) is None


def _seqeval(true, pred, scheme):
    """seqeval's default mode (conlleval's chunks) and its strict mode, named as ours."""
    from seqeval import metrics
    from seqeval.scheme import IOB2, IOBES
    scheme = {"IOB2": IOB2, "IOBES": IOBES}[scheme]
    out = {}
    for name in ("precision", "recall", "f1"):
        score = getattr(metrics, f"{name}_score")
        out[name] = score(true, pred, zero_division=0)
        out[f"strict_{name}"] = score(true, pred, mode="strict", scheme=scheme, zero_division=0)
    return out


PERFECT = {"precision": 1.0, "recall": 1.0, "f1": 1.0}
NOTHING = {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def _both(default, strict):
    return {**default, **{f"strict_{k}": v for k, v in strict.items()}}


@pytest.mark.parametrize("scheme", ["IOB2", "IOBES"])
def test_entity_scores_equal_seqeval_on_random_tags(scheme):
    prefixes = "BIO" if scheme == "IOB2" else "BIOES"
    tags = ["O"] + [f"{p}-{t}" for p in prefixes if p != "O" for t in ("PER", "LOC")]
    for seed in range(150):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(0, 12, rng.integers(1, 6))
        # mostly-right predictions, and true tags that are themselves often ill-formed
        true = [[str(t) for t in rng.choice(tags, n)] for n in lengths]
        pred = [[t if rng.random() < 0.6 else str(rng.choice(tags)) for t in s] for s in true]
        got = es.entity_scores(true, pred, scheme)
        want = _seqeval(true, pred, scheme)
        assert got == pytest.approx(want, abs=1e-12), (seed, true, pred)


def test_entity_scores_hand_cases():
    true = [["B-PER", "I-PER", "O", "B-LOC"]]
    assert es.entity_scores(true, true, "IOB2") == _both(PERFECT, PERFECT)
    # span too short, and a stray I-LOC after O: a chunk for conlleval, no entity in strict IOB2
    got = es.entity_scores(true, [["B-PER", "O", "O", "I-LOC"]], "IOB2")
    assert got == _both({"precision": 0.5, "recall": 0.5, "f1": 0.5}, NOTHING)
    # a chunk that starts with I- counts as one (conlleval, seqeval's default), not in strict
    assert es.entity_scores([["B-PER", "I-PER"]], [["I-PER", "I-PER"]], "IOB2") == \
        _both(PERFECT, NOTHING)
    assert es.chunks(["I-PER", "I-PER", "E-PER", "I-PER", "S-LOC", "B-LOC", "I-ORG"]) == \
        {("PER", 0, 3), ("PER", 3, 4), ("LOC", 4, 5), ("LOC", 5, 6), ("ORG", 6, 7)}
    # type change midway: B-PER I-LOC is the entity PER (0, 1) only
    assert es.spans(["B-PER", "I-LOC", "I-LOC"], "IOB2") == {("PER", 0, 1)}
    got = es.entity_scores([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "B-ORG"]], "IOB2")
    half = {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert got == pytest.approx(_both(half, half))
    # IOBES: B-X I-X without E-X is no entity; S-X is one
    assert es.spans(["B-PER", "I-PER", "S-LOC", "B-ORG", "E-ORG"], "IOBES") == \
        {("LOC", 2, 3), ("ORG", 3, 5)}
    assert es.entity_scores([["O"]], [["O"]], "IOBES") == _both(NOTHING, NOTHING)
    for true, pred, scheme in [([["B-PER", "I-PER", "O", "B-LOC"]],
                                [["B-PER", "I-PER", "I-PER", "B-LOC"]], "IOB2"),
                               ([["B-PER", "E-PER", "S-LOC"]], [["B-PER", "I-PER", "S-LOC"]],
                                "IOBES")]:
        assert es.entity_scores(true, pred, scheme) == pytest.approx(_seqeval(true, pred, scheme))


def test_entity_scores_refusals():
    with pytest.raises(BertJaxError, match=r"predicted sentence 1: word 2: tag 'S-PER' is not a "
                                           r"IOB2 tag"):
        es.entity_scores([["O", "O"]], [["O", "S-PER"]], "IOB2")
    with pytest.raises(BertJaxError, match="sentence 1: 1 tags for 2 words"):
        es.entity_scores([["O", "O"]], [["O"]], "IOB2")
    with pytest.raises(BertJaxError, match="scheme: expected one of IOB2, IOBES"):
        es.entity_scores([], [], "BILOU")


def test_token_accuracy():
    true = [np.array([0, 1, 2]), np.array([], int), np.array([3])]
    pred = [np.array([0, 2, 2]), np.array([], int), np.array([3])]
    assert es.token_accuracy(true, pred) == 0.75
    assert es.token_accuracy([], []) == 0.0
    with pytest.raises(BertJaxError, match="sentence 1: 2 labels for 3 words"):
        es.token_accuracy(true[:1], [np.array([0, 1])])
