"""BertConfig: presets, config.json round trip with transformers, refusal of bad values."""

import json

import pytest

from bert_jax.models.config import BertConfig
from bert_jax.errors import BertJaxError


@pytest.mark.parametrize("name,layers,hidden,heads", [
    ("tiny", 2, 128, 2), ("mini", 4, 256, 4), ("small", 4, 512, 8), ("medium", 8, 512, 8),
    ("base", 12, 768, 12), ("large", 24, 1024, 16)])
def test_presets(name, layers, hidden, heads):
    c = BertConfig.preset(name)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == (layers, hidden, heads)
    assert c.intermediate_size == 4 * hidden
    assert (c.vocab_size, c.max_position_embeddings, c.type_vocab_size) == (30522, 512, 2)
    assert BertConfig.preset(name, vocab_size=1000).vocab_size == 1000


def test_config_json_round_trip_and_transformers_reads_it(tmp_path):
    import transformers
    c = BertConfig.preset("mini", hidden_act="gelu_new", id2label=("neg", "pos", "neutral"),
                          classifier_dropout=0.2, tie_word_embeddings=False)
    path = str(tmp_path / "config.json")
    c.to_json_file(path, architectures=["BertForSequenceClassification"])
    assert BertConfig.from_json_file(path) == c
    hf = transformers.BertConfig.from_pretrained(str(tmp_path))
    assert (hf.hidden_size, hf.num_hidden_layers, hf.hidden_act, hf.num_labels) == (
        256, 4, "gelu_new", 3)
    assert hf.id2label == {0: "neg", 1: "pos", 2: "neutral"}
    assert hf.tie_word_embeddings is False and hf.classifier_dropout == 0.2


def test_transformers_config_json_is_read(tmp_path):
    import transformers
    transformers.BertConfig(hidden_size=48, num_attention_heads=3, num_labels=4).save_pretrained(
        str(tmp_path))
    c = BertConfig.from_json_file(str(tmp_path / "config.json"))
    assert (c.hidden_size, c.num_attention_heads, c.num_labels) == (48, 3, 4)


@pytest.mark.parametrize("fields,needle", [
    (dict(hidden_size=100, num_attention_heads=3), "hidden_size"),
    (dict(num_hidden_layers=0), "num_hidden_layers"),
    (dict(vocab_size=-5), "vocab_size"),
    (dict(intermediate_size=3.5), "intermediate_size"),
    (dict(hidden_act="gelu_fast_typo"), "hidden_act"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(layer_norm_eps=0), "layer_norm_eps"),
    (dict(position_embedding_type="relative_key"), "position_embedding_type"),
])
def test_invalid_values_name_the_field(fields, needle):
    with pytest.raises(BertJaxError, match=needle):
        BertConfig(**fields)


def test_unknown_preset():
    with pytest.raises(BertJaxError, match="huge"):
        BertConfig.preset("huge")


@pytest.mark.parametrize("d,needle", [
    ({"model_type": "roberta", "hidden_size": 768, "num_attention_heads": 12}, "roberta"),
    ({"model_type": "gpt2", "n_embd": 768, "n_head": 12}, "gpt2"),
    ({"n_embd": 768, "n_head": 12}, "not a BERT config"),
    ({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 5}, "hidden_size"),
    ({"model_type": "bert", "id2label": {"0": "a", "2": "b"}}, "id2label"),
])
def test_bad_config_json_names_file_and_field(tmp_path, d, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BertJaxError, match=needle) as e:
        BertConfig.from_json_file(str(path))
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_missing_and_malformed_config_file(tmp_path):
    with pytest.raises(BertJaxError, match="not found"):
        BertConfig.from_json_file(str(tmp_path / "nope.json"))
    (tmp_path / "bad.json").write_text("{hidden_size: 3")
    with pytest.raises(BertJaxError, match="not valid JSON"):
        BertConfig.from_json_file(str(tmp_path / "bad.json"))
