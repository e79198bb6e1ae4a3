"""Converter: parity with transformers, bit-exact round trips, clean refusal of bad checkpoints."""

import os

import jax
import numpy as np
import pytest
from conftest import make_hf_model
from safetensors.numpy import load_file

from bert_jax.model_files import parity
from bert_jax.model_files.huggingface import load_hf, read_state_dict, save_hf
from bert_jax.models.task_models import BertForPreTraining
from bert_jax.model_files.model_dir import load_pretrained, save_model_dir

SHAPES = [  # (hidden, heads, layers, intermediate, hidden_act, batch, seq_len)
    (16, 1, 1, 40, "gelu", 2, 7),
    (32, 2, 2, 37, "gelu", 3, 13),
    (64, 4, 3, 96, "gelu_new", 4, 17),
]


def assert_parity(report):
    for name in ("sequence_output", "pooled_output"):
        if name in report:
            assert report[name] <= 1e-5, (name, report)
    for name, value in report.items():
        if name.endswith("logits"):
            assert value <= 1e-4, (name, report)
        if name.endswith("agreement"):
            assert value == 1.0, (name, report)


@pytest.mark.parametrize("architecture", ["BertForPreTraining", "BertForMaskedLM",
                                          "BertForSequenceClassification", "BertModel"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"H{s[0]}A{s[1]}L{s[2]}")
def test_parity_with_random_init_transformers(tmp_path, architecture, shape):
    hidden, heads, layers, inter, act, batch, seq_len = shape
    make_hf_model(str(tmp_path), architecture, seed=hidden, hidden_size=hidden,
                  num_attention_heads=heads, num_hidden_layers=layers, intermediate_size=inter,
                  hidden_act=act, num_labels=3)
    report = parity.compare(str(tmp_path), batch_size=batch, seq_len=seq_len, seed=layers)
    expected = {"BertForPreTraining": {"mlm_logits", "nsp_logits", "pooled_output"},
                "BertForMaskedLM": {"mlm_logits"},
                "BertForSequenceClassification": {"classifier_logits", "pooled_output"},
                "BertModel": {"pooled_output"}}[architecture]
    assert expected | {"sequence_output"} <= set(report)
    assert_parity(report)


@pytest.mark.parametrize("layout", ["bin", "tied_copy", "untied"])
def test_other_layouts_bin_tied_copy_untied(tmp_path, layout):
    make_hf_model(str(tmp_path), fmt="bin" if layout == "bin" else "safetensors",
                  tied_copy=layout == "tied_copy", tie_word_embeddings=layout != "untied")
    names = set(read_state_dict(str(tmp_path)))
    assert "cls.predictions.decoder.weight" in names  # a tied copy (checked, dropped) or its own
    config, params = load_hf(str(tmp_path))
    assert config.tie_word_embeddings == (layout != "untied")
    assert ("decoder" in params["predictions"]) == (layout == "untied")
    assert_parity(parity.compare(str(tmp_path), seq_len=11))


def test_real_minilm_parity_and_bfloat16(minilm_dir):
    report = parity.compare(minilm_dir, batch_size=4, seq_len=37, seed=1)
    assert set(report) == {"sequence_output", "pooled_output"}
    assert report["sequence_output"] <= 1e-5 and report["pooled_output"] <= 1e-5, report
    # bfloat16: outputs reach |6| where bf16's spacing is 0.03, so the sequence output is held to
    # 2e-2 relative to its largest value; the tanh-bounded pooled output to 2e-2 absolute.
    from bert_jax.models.encoder import BertModel
    import jax.numpy as jnp
    config, params = load_hf(minilm_dir)
    batch = parity.inputs_np(parity.parity_batch(config, 4, 37, seed=1))
    seq, pooled = BertModel(config).apply({"params": params["bert"]}, **batch)
    seq16, pooled16 = BertModel(config, jnp.bfloat16).apply({"params": params["bert"]}, **batch)
    rel = np.abs(np.asarray(seq16, np.float32) - seq).max() / np.abs(seq).max()
    assert rel <= 2e-2 and np.abs(np.asarray(pooled16, np.float32) - pooled).max() <= 2e-2


def test_hf_to_ours_to_hf_is_bit_exact(tmp_path, minilm_dir):
    src, ours, back = tmp_path / "src", tmp_path / "ours", tmp_path / "back"
    make_hf_model(str(src))
    config, params = load_hf(str(src))
    save_model_dir(str(ours), config, params)
    config2, params2 = load_pretrained(str(ours))
    assert config2 == config
    save_hf(str(back), config2, params2)
    a, b = load_file(str(src / "model.safetensors")), load_file(str(back / "model.safetensors"))
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    # the real checkpoint too (BertModel layout, no prefix), through the model directory
    config, params = load_pretrained(minilm_dir)
    save_hf(str(tmp_path / "minilm"), config, params)
    a, b = load_file(os.path.join(minilm_dir, "model.safetensors")), load_file(
        str(tmp_path / "minilm" / "model.safetensors"))
    assert set(a) - set(b) == {"embeddings.position_ids"} and set(b) <= set(a)
    assert all(np.array_equal(a[k], b[k]) for k in b)


@pytest.mark.parametrize("tied", [True, False])
def test_ours_to_hf_to_ours_is_bit_exact_and_loads_cleanly_in_transformers(tmp_path, tied):
    import transformers
    from bert_jax.models.config import BertConfig
    config = BertConfig(vocab_size=89, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=48, max_position_embeddings=32,
                        tie_word_embeddings=tied)
    ids = np.ones((1, 4), np.int32)
    params = BertForPreTraining(config).init(jax.random.key(7), ids)["params"]
    params = jax.tree.map(lambda x: np.asarray(x) + np.float32(0.01), params)  # nonzero biases
    save_hf(str(tmp_path / "hf"), config, params)
    model, info = transformers.BertForPreTraining.from_pretrained(
        str(tmp_path / "hf"), output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    config2, params2 = load_hf(str(tmp_path / "hf"))
    assert config2 == config
    assert jax.tree.all(jax.tree.map(np.array_equal, params, params2))
    assert jax.tree.structure(params) == jax.tree.structure(params2)
    decoder = model.cls.predictions.decoder.weight.detach().numpy()
    if tied:
        assert np.array_equal(decoder, params["bert"]["embeddings"]["word_embeddings"]["embedding"])
    else:
        assert np.array_equal(decoder, params["predictions"]["decoder"]["kernel"].T)
    assert_parity(parity.compare(str(tmp_path / "hf")))
