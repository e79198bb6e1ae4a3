"""Question answering, token classification and multiple choice: parity with transformers both
ways, the pooler rule, and the architecture lookup where parameter trees look alike."""

import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hf_model
from safetensors.numpy import load_file, save_file

from bert_jax.model_files.huggingface import (load_hf, named_architecture, read_state_dict,
                                              save_hf, to_state_dict)
from bert_jax.model_files.model_dir import load_model_dir, save_model_dir
from bert_jax.errors import BertJaxError
from bert_jax.models import (BertConfig, BertForMultipleChoice, BertForQuestionAnswering,
                             BertForTokenClassification)
from bert_jax.models.task_models import ARCHITECTURES, architecture_of, model_for_params

NEW = ["BertForQuestionAnswering", "BertForTokenClassification", "BertForMultipleChoice"]


def batch(shape, vocab=97, seed=0):
    """Random ids of `shape` (…, L): every row padded from a different length, segment B in the
    second half of the real tokens."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, shape)
    rows = ids.reshape(-1, shape[-1])
    mask, types = np.zeros_like(rows), np.zeros_like(rows)
    for r in range(len(rows)):
        n = shape[-1] - r % (shape[-1] - 2)
        mask[r, :n], types[r, n // 2:n] = 1, 1
        rows[r, n:] = 0
    return {"input_ids": ids, "token_type_ids": types.reshape(shape),
            "attention_mask": mask.reshape(shape)}


def torch_logits(model, inputs):
    import torch
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(np.asarray(v, np.int64)) for k, v in inputs.items()})
    if hasattr(out, "start_logits"):
        return out.start_logits.numpy(), out.end_logits.numpy()
    return (out.logits.numpy(),)


def our_logits(config, params, inputs, architecture):
    module = model_for_params(config, params, name=architecture)
    out = module.apply({"params": params}, **{k: np.asarray(v, np.int32)
                                              for k, v in inputs.items()})
    return tuple(np.asarray(o) for o in (out if isinstance(out, tuple) else (out,)))


def inputs_for(architecture):
    return batch((2, 3, 9) if architecture == "BertForMultipleChoice" else (3, 11), seed=1)


@pytest.mark.parametrize("architecture", NEW)
def test_parity_both_ways_with_transformers(tmp_path, architecture):
    import transformers
    labels = 2 if architecture == "BertForQuestionAnswering" else 5  # (start, end) in HF's QA
    hf = make_hf_model(str(tmp_path / "hf"), architecture, seed=3, num_labels=labels)
    config, params = load_hf(str(tmp_path / "hf"))
    assert architecture_of(params, config) == architecture
    assert ("pooler" in params["bert"]) == (architecture == "BertForMultipleChoice")
    inputs = inputs_for(architecture)
    ref, ours = torch_logits(hf, inputs), our_logits(config, params, inputs, architecture)
    shapes = {"BertForQuestionAnswering": [(3, 11), (3, 11)],
              "BertForTokenClassification": [(3, 11, 5)], "BertForMultipleChoice": [(2, 3)]}
    assert [o.shape for o in ours] == shapes[architecture]
    assert all(o.dtype == np.float32 for o in ours)
    for a, b in zip(ours, ref):
        assert np.abs(a - b).max() <= 1e-4, np.abs(a - b).max()

    assert save_hf(str(tmp_path / "back"), config, params) == architecture
    with open(tmp_path / "back" / "config.json") as f:
        assert json.load(f)["architectures"] == [architecture]
    back, info = getattr(transformers, architecture).from_pretrained(
        str(tmp_path / "back"), output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    for a, b in zip(ours, torch_logits(back.eval(), inputs)):
        assert np.abs(a - b).max() <= 1e-4
    a, b = load_file(str(tmp_path / "hf" / "model.safetensors")), load_file(
        str(tmp_path / "back" / "model.safetensors"))
    assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)  # bit-exact

    save_model_dir(str(tmp_path / "ours"), config, params)
    config2, params2 = load_model_dir(str(tmp_path / "ours"))
    assert config2 == config and jax.tree.all(jax.tree.map(np.array_equal, params, params2))


@pytest.mark.parametrize("architecture", ["BertForQuestionAnswering",
                                          "BertForTokenClassification"])
def test_per_position_checkpoints_have_no_pooler_and_an_old_unused_one_is_ignored(
        tmp_path, architecture):
    make_hf_model(str(tmp_path), architecture)
    assert not any("pooler" in k for k in read_state_dict(str(tmp_path)))
    _, params = load_hf(str(tmp_path))
    assert "pooler" not in params["bert"]
    # releases before transformers 3.1 saved an (unused) pooler with these classes
    path = str(tmp_path / "model.safetensors")
    state = load_file(path)
    state["bert.pooler.dense.weight"] = np.ones((32, 32), np.float32)
    state["bert.pooler.dense.bias"] = np.ones(32, np.float32)
    save_file(state, path, metadata={"format": "pt"})
    _, again = load_hf(str(tmp_path))
    assert jax.tree.all(jax.tree.map(np.array_equal, params, again))


def test_other_classes_without_pooler_are_still_refused(tmp_path):
    make_hf_model(str(tmp_path), "BertForSequenceClassification", num_labels=4)
    path = str(tmp_path / "model.safetensors")
    state = {k: v for k, v in load_file(path).items() if "pooler" not in k}
    save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(BertJaxError, match=r"missing tensor\(s\) bert\.pooler\.dense\.weight"):
        load_hf(str(tmp_path))


def drop_architectures(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        d = json.load(f)
    del d["architectures"]
    with open(path, "w") as f:
        json.dump(d, f)


def test_architecture_name_settles_what_the_tree_cannot(tmp_path):
    # a regression head (num_labels=1) and a multiple-choice head are both pooled → Dense(1)
    make_hf_model(str(tmp_path / "reg"), "BertForSequenceClassification", num_labels=1)
    make_hf_model(str(tmp_path / "mc"), "BertForMultipleChoice", num_labels=1)
    for name, arch in (("reg", "BertForSequenceClassification"), ("mc", "BertForMultipleChoice")):
        config, params = load_hf(str(tmp_path / name))  # config.json names it
        assert model_for_params(config, params, name=arch).__class__ is ARCHITECTURES[arch][0]
        message = (r"params: the parameters fit BertForSequenceClassification and "
                   r"BertForMultipleChoice alike; name the architecture")
        with pytest.raises(BertJaxError, match=message):
            architecture_of(params, config)
        with pytest.raises(BertJaxError, match=message):
            save_hf(str(tmp_path / f"{name}-out"), config, params)
        assert not os.path.exists(tmp_path / f"{name}-out")
        assert save_hf(str(tmp_path / f"{name}-out"), config, params, architecture=arch) == arch
        save_model_dir(str(tmp_path / f"{name}-dir"), config, params, architecture=arch)
        assert named_architecture(str(tmp_path / f"{name}-dir")) == arch
        assert load_model_dir(str(tmp_path / f"{name}-dir"))[0] == config  # checked by that name
        drop_architectures(str(tmp_path / name))
        where = re.escape(str(tmp_path / name))
        with pytest.raises(BertJaxError, match=f"^{where}: the parameters fit "):
            load_hf(str(tmp_path / name))


def test_tree_shape_settles_the_usual_cases_without_a_name(tmp_path):
    # multiple choice with HF's default two labels: its width-1 classifier cannot be theirs
    make_hf_model(str(tmp_path / "mc"), "BertForMultipleChoice")
    make_hf_model(str(tmp_path / "tok"), "BertForTokenClassification", num_labels=3)
    make_hf_model(str(tmp_path / "seq"), "BertForSequenceClassification", num_labels=3)
    for name, arch in (("mc", "BertForMultipleChoice"), ("tok", "BertForTokenClassification"),
                       ("seq", "BertForSequenceClassification")):
        drop_architectures(str(tmp_path / name))
        config, params = load_hf(str(tmp_path / name))
        assert architecture_of(params, config) == arch
        assert to_state_dict(config, params)[0] == arch
    # a name that contradicts the tree is caught by the shape check, not obeyed
    config, params = load_hf(str(tmp_path / "tok"))
    with pytest.raises(BertJaxError, match="params: missing bert/pooler/dense"):
        to_state_dict(config, params, "BertForSequenceClassification")
    with pytest.raises(BertJaxError, match=r"unsupported parameter groups \['bert', 'heads'\]"):
        architecture_of({"bert": {}, "heads": {}})


CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=24, max_position_embeddings=16)


@pytest.mark.parametrize("cls", [BertForQuestionAnswering, BertForTokenClassification,
                                 BertForMultipleChoice])
def test_dropout_training_mode_and_bfloat16(cls):
    shape = (2, 3, 8) if cls is BertForMultipleChoice else (2, 8)
    inputs = {k: np.asarray(v, np.int32) for k, v in batch(shape, vocab=50).items()}
    params = cls(CONFIG).init(jax.random.key(0), **inputs)["params"]
    assert set(params) == {"bert"} | ARCHITECTURES[cls.__name__][1]
    model = cls(CONFIG)
    run = lambda key: model.apply({"params": params}, **inputs, deterministic=False,  # noqa
                                  rngs={"dropout": jax.random.key(key)})
    eval_out = jax.tree.leaves(model.apply({"params": params}, **inputs))
    a, b = jax.tree.leaves(run(1)), jax.tree.leaves(run(2))
    assert all(np.abs(x - y).max() > 1e-3 for x, y in zip(a, b))  # dropout is on
    assert all(np.abs(x - y).max() > 1e-3 for x, y in zip(a, eval_out))
    bf16 = jax.tree.leaves(cls(CONFIG, jnp.bfloat16).apply({"params": params}, **inputs))
    assert all(x.dtype == jnp.float32 for x in bf16)
    assert all(np.abs(x - y).max() <= 5e-2 for x, y in zip(bf16, eval_out))


def test_question_answering_needs_two_labels():
    ids = np.ones((1, 4), np.int32)
    message = r"^id2label: question answering needs 2 labels \(start, end\), got 3"
    with pytest.raises(BertJaxError, match=message):
        BertForQuestionAnswering(CONFIG.replace(id2label=("a", "b", "c"))).init(
            jax.random.key(0), ids)
