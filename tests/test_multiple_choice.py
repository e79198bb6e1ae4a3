"""Multiple-choice (SWAG) encoding: shapes, the context/ending pairing, labels, bad input."""

import json

import datasets
import numpy as np
import pytest

from bert_jax.tasks import multiple_choice as mc
from bert_jax.data.tokenizer import load
from bert_jax.errors import BertJaxError

ROWS = [
    {"sent1": "Members of the procession walk down the street holding small horn brass "
              "instruments.",
     "sent2": "A drum line", "ending0": "passes by walking down the street playing their "
                                        "instruments.",
     "ending1": "has heard approaching them.", "ending2": "arrives and they're outside dancing "
                                                         "and asleep.",
     "ending3": "turns the lead singer watches the performance.", "label": 0},
    {"sent1": "A man is sitting on a roof.", "sent2": "He",
     "ending0": "is using wrap to wrap a pair of skis.", "ending1": "is ripping level tiles off.",
     "ending2": "is holding a rubik's cube.", "ending3": "starts pulling up roofing on a roof.",
     "label": 3},
]


@pytest.fixture(scope="module")
def tok(minilm_dir):
    return load(minilm_dir)


def test_shapes_pairing_and_labels(tok, minilm_dir):
    from transformers import BertTokenizerFast
    table = datasets.Dataset.from_list(ROWS)
    feats = mc.encode(tok, table, "train", 24)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert feats[key].shape == (2, 4, 24) and feats[key].dtype == np.int32
    assert feats["labels"].tolist() == [0, 3] and feats["labels"].dtype == np.int32

    ids = feats["input_ids"][1, 2][feats["attention_mask"][1, 2] == 1]
    assert tok.decode(ids.tolist(), skip_special_tokens=False) == \
        "[CLS] a man is sitting on a roof. [SEP] he is holding a rubik ' s cube. [SEP]"
    sep = np.flatnonzero(ids == tok.token_to_id("[SEP]"))[0]
    types = feats["token_type_ids"][1, 2][:len(ids)]
    assert (types[:sep + 1] == 0).all() and (types[sep + 1:] == 1).all()
    row0 = feats["input_ids"][0, 2][feats["attention_mask"][0, 2] == 1]
    assert len(row0) == 24  # the long row was trimmed to fit

    # the same pairs and truncation as Hugging Face's run_swag
    hf = BertTokenizerFast.from_pretrained(minilm_dir)
    assert hf.vocab_size == 30522
    firsts = [r["sent1"] for r in ROWS for _ in range(4)]
    seconds = [f"{r['sent2']} {r[f'ending{i}']}" for r in ROWS for i in range(4)]
    want = hf(firsts, seconds, truncation=True, max_length=24, padding="max_length")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert feats[key].reshape(8, 24).tolist() == want[key]


def test_load_splits_files_and_unlabelled(tmp_path, tok, caplog):
    rows = [dict(r, label=-1) for r in ROWS]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "train.csv").write_text(
        "sent1,sent2,ending0,ending1,label\nA man sits.,He,stands.,sleeps.,1\n")
    splits = mc.load_splits("", "", {"train": str(tmp_path / "train.csv"),
                                     "test": str(tmp_path / "test.jsonl")})
    where, table = splits["test"]
    feats = mc.encode(tok, table, where, 32)
    assert "labels" not in feats and feats["input_ids"].shape == (2, 4, 32)
    assert "has no labels" in caplog.text
    where, table = splits["train"]
    feats = mc.encode(tok, table, where, 16, ending_columns=("ending0", "ending1"))
    assert feats["input_ids"].shape == (1, 2, 16) and feats["labels"].tolist() == [1]
    no_label = mc.encode(tok, table.remove_columns("label"), where, 16,
                         ending_columns=("ending0", "ending1"))
    assert "labels" not in no_label


def test_refusals(tok):
    table = datasets.Dataset.from_list(ROWS)
    with pytest.raises(BertJaxError, match=r"train: no column 'ending4'; columns present: "
                                           r"sent1, sent2, ending0"):
        mc.encode(tok, table, "train", 32, ending_columns=("ending0", "ending4"))
    bad = datasets.Dataset.from_list([ROWS[0], dict(ROWS[1], label=4)])
    with pytest.raises(BertJaxError, match=r"train: row 2: column 'label' is 4; expected the "
                                           r"right ending's index 0\.\.3"):
        mc.encode(tok, bad, "train", 32)
    bad = datasets.Dataset.from_list([ROWS[0], dict(ROWS[1], ending1=None)])
    with pytest.raises(BertJaxError, match=r"train: row 2: column 'ending1' is empty"):
        mc.encode(tok, bad, "train", 32)
    bad = datasets.Dataset.from_list([dict(ROWS[0], label=None), ROWS[1]])
    with pytest.raises(BertJaxError, match=r"train: row 1: column 'label' is empty"):
        mc.encode(tok, bad, "train", 32)
    with pytest.raises(BertJaxError, match="max_seq_length: too small"):
        mc.encode(tok, table, "train", 3)
    with pytest.raises(BertJaxError, match="at least two candidate endings"):
        mc.encode(tok, table, "train", 32, ending_columns=("ending0",))
