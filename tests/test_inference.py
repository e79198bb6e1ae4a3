"""Using models: fill-mask top-k and embeddings against transformers on the real MiniLM encoder."""

import os
import shutil

import numpy as np
import pytest

from bert_jax import cli
from bert_jax import inference

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France, and a large city.", "ok"]


@pytest.fixture(scope="module")
def mlm_dir(minilm_dir, tmp_path_factory):
    """MiniLM's encoder + seeded new pretraining heads, saved by transformers (bert. prefix, tied
    decoder omitted): DATA.md's recipe for a released checkpoint with MLM heads."""
    import torch
    import transformers
    path = tmp_path_factory.mktemp("mlm") / "hf"
    torch.manual_seed(0)
    model = transformers.BertForPreTraining.from_pretrained(minilm_dir).eval()
    model.save_pretrained(path)
    for name in ("vocab.txt", "tokenizer.json"):
        shutil.copy(os.path.join(minilm_dir, name), path / name)
    return path, model


def test_fill_mask_top_k_matches_transformers(mlm_dir, capsys):
    import torch
    import transformers
    path, hf = mlm_dir
    text = "the [MASK] sat on the mat and [MASK] at the dog."
    config, params, tok = inference.load(str(path))
    ours = inference.fill_mask(config, params, tok, text, top_k=5)
    hf_tok = transformers.AutoTokenizer.from_pretrained(path)
    enc = hf_tok(text, return_tensors="pt")
    with torch.no_grad():
        logits = hf(**enc).prediction_logits[0]
    positions = (enc["input_ids"][0] == hf_tok.mask_token_id).nonzero()[:, 0]
    assert len(ours) == len(positions) == 2
    for candidates, position in zip(ours, positions):
        probs = torch.softmax(logits[position], -1)
        top = torch.topk(probs, 5)
        assert [t for t, _ in candidates] == hf_tok.convert_ids_to_tokens(top.indices.tolist())
        np.testing.assert_allclose([p for _, p in candidates], top.values.numpy(), atol=1e-5)
    assert cli.main(["fill-mask", str(path), text, "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("[MASK] ") == 2 and candidates[0][0] in out


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_embed_matches_transformers(minilm_dir, pooling, tmp_path, capsys):
    import torch
    import transformers
    hf = transformers.BertModel.from_pretrained(minilm_dir).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    enc = hf_tok(TEXTS, truncation=True, max_length=16, padding="max_length", return_tensors="pt")
    with torch.no_grad():
        seq = hf(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].float()
    theirs = (seq[:, 0] if pooling == "cls" else (seq * mask).sum(1) / mask.sum(1)).numpy()
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "e.npy"
    assert cli.main(["embed", minilm_dir, "--input", str(source), "--output", str(out),
                     "--pooling", pooling, "--max-seq-length", "16", "--batch-size", "2"]) == 0
    ours = np.load(out)
    assert ours.shape == (3, 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_fill_mask_needs_an_mlm_head(minilm_dir, capsys):
    assert cli.main(["fill-mask", minilm_dir, "a [MASK] day"]) == 2
    assert "has no masked-LM head" in capsys.readouterr().err
