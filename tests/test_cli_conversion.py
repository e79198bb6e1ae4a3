"""cli/conversion.py: `bert-jax convert` / `parity` end to end, and one clean line for every bad
checkpoint."""

import json
import os
import sys

import numpy as np
import pytest
from conftest import make_hf_model
from safetensors.numpy import load_file, save_file

from bert_jax import cli


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_convert_both_ways_and_parity_cli(tmp_path, capsys, minilm_dir):
    ours, back = str(tmp_path / "ours"), str(tmp_path / "back")
    code, out, err = run_cli(capsys, "convert", minilm_dir, ours)
    assert code == 0, err
    assert "BertModel" in out and "22,713,216 parameters" in out
    assert {"config.json", "params", "vocab.txt", "tokenizer.json"} <= set(os.listdir(ours))
    code, out, err = run_cli(capsys, "convert", ours, back, "--to", "hf")
    assert code == 0, err
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(back))
    code, out, err = run_cli(capsys, "parity", back)
    assert code == 0, err
    diffs = {line.split()[0]: float(line.split()[-1]) for line in out.splitlines()[1:]}
    assert set(diffs) == {"sequence_output", "pooled_output"}
    assert max(diffs.values()) <= 1e-5
    # a non-empty destination is refused unless --overwrite
    code, _, err = run_cli(capsys, "convert", minilm_dir, ours)
    assert code == 2 and "not empty" in err
    assert run_cli(capsys, "convert", minilm_dir, ours, "--overwrite")[0] == 0


def _corrupt(kind, src):
    """Damage a freshly saved random-init checkpoint in one way; returns the expected needle."""
    weights = os.path.join(src, "model.safetensors")
    config = os.path.join(src, "config.json")
    if kind == "missing_dir":
        return os.path.join(src, "nope"), "no such directory"
    if kind == "missing_config":
        os.remove(config)
        return src, "config.json: config file not found"
    if kind == "no_weights":
        os.remove(weights)
        return src, "no weights found"
    if kind == "truncated":
        data = open(weights, "rb").read()
        open(weights, "wb").write(data[: len(data) // 2])
        return src, "model.safetensors: not a valid safetensors file"
    if kind == "garbage":
        open(weights, "wb").write(b"\x00" * 64)
        return src, "model.safetensors: not a valid safetensors file"
    state = load_file(weights)
    if kind == "wrong_shape":
        name = "bert.encoder.layer.1.attention.self.key.weight"
        state[name] = np.zeros((32, 31), np.float32)
        needle = f"tensor {name} has shape (32, 31), expected (32, 32)"
    elif kind == "unknown_key":
        state["bert.encoder.layer.0.adapter.weight"] = np.zeros(3, np.float32)
        needle = "unexpected tensor(s) not in a BERT model: bert.encoder.layer.0.adapter.weight"
    elif kind == "missing_key":
        del state["bert.encoder.layer.1.output.dense.bias"]
        needle = "missing tensor(s) bert.encoder.layer.1.output.dense.bias"
    elif kind in ("roberta", "gpt2"):
        d = json.load(open(config))
        d["model_type"] = kind
        json.dump(d, open(config, "w"))
        needle = f"model_type is '{kind}'"
    elif kind == "bad_hidden":
        d = json.load(open(config))
        d["num_attention_heads"] = 5
        json.dump(d, open(config, "w"))
        needle = "hidden_size: 32 is not divisible by num_attention_heads (5)"
    save_file(state, weights, metadata={"format": "pt"})
    return src, needle


KINDS = ["missing_dir", "missing_config", "no_weights", "truncated", "garbage", "wrong_shape",
         "unknown_key", "missing_key", "roberta", "gpt2", "bad_hidden"]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_checkpoint_is_one_line_and_writes_nothing(tmp_path, capsys, kind):
    src = str(tmp_path / "src")
    make_hf_model(src)
    src, needle = _corrupt(kind, src)
    capsys.readouterr()
    dst = str(tmp_path / "dst")
    for argv in (["convert", src, dst], ["parity", src]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert needle in err, err
    assert sorted(os.listdir(tmp_path)) == ["src"]  # nothing written, no temp left behind


def test_bin_without_torch_says_so(tmp_path, capsys, monkeypatch):
    src = str(tmp_path / "src")
    make_hf_model(src, fmt="bin")
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    code, _, err = run_cli(capsys, "convert", src, str(tmp_path / "dst"))
    assert code == 2 and "pytorch_model.bin needs torch" in err


def test_export_refuses_params_that_do_not_fit_config(tmp_path, capsys):
    from bert_jax.model_files.huggingface import load_hf
    from bert_jax.model_files.model_dir import save_model_dir
    src = str(tmp_path / "src")
    make_hf_model(src)
    config, params = load_hf(src)
    params["bert"]["pooler"]["dense"]["bias"] = np.zeros(7, np.float32)
    with pytest.raises(Exception, match="bert/pooler/dense/bias has shape"):
        save_model_dir(str(tmp_path / "ours"), config, params)
    assert not os.path.exists(tmp_path / "ours")
