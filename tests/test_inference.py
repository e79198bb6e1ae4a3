"""Using models: fill-mask top-k and embeddings against transformers on the real MiniLM encoder."""

import contextlib
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


# -- jitted forward passes: the parameters are an argument, not constants of the program -----

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "the", "a", "cat", "dog", "sat",
         "on", "mat", "read", "book", "good", "film", "bad", "day", "tea"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 20-token vocabulary, a tiny 3-label config and two different random models of it."""
    import jax

    from bert_jax.data import tokenizer
    from bert_jax.models import BertForSequenceClassification
    from bert_jax.models.config import BertConfig
    vocab = tmp_path_factory.mktemp("tiny_vocab") / "vocab.txt"
    vocab.write_text("".join(w + "\n" for w in WORDS), encoding="utf-8")
    tok = tokenizer.load(str(vocab))
    assert tok.get_vocab_size() == len(WORDS)
    config = BertConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=37, max_position_embeddings=24,
                        id2label=("neg", "neutral", "pos"))
    ids = np.ones((1, 8), np.int32)
    init = jax.jit(BertForSequenceClassification(config).init)  # one compile for both seeds
    params = [init(jax.random.key(seed), ids, np.zeros_like(ids), ids)["params"]
              for seed in (1, 2)]
    return config, tok, *params


TINY_TEXTS = ["the cat sat on the mat .", "a good film", "bad day", "the dog read a book",
              "tea"]


@contextlib.contextmanager
def backend_compiles():
    """The XLA compiles that happen inside the block."""
    import jax
    seen = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            seen.append(duration)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def encoded(tok, length=16):
    from bert_jax.data import tokenizer
    return tokenizer.encode_batch(tok, TINY_TEXTS, None, length, pad=True)


def test_predict_proba_compiles_once_for_every_model_of_a_config(tiny):
    import jax

    from bert_jax.models import BertForSequenceClassification
    config, tok, params_a, params_b = tiny
    first = inference.predict_proba(config, params_a, tok, TINY_TEXTS, None, 16, 2)
    with backend_compiles() as compiles:
        second = inference.predict_proba(config, params_b, tok, TINY_TEXTS, None, 16, 2)
    assert compiles == []  # other weights, same shapes: the compiled program is reused
    b = encoded(tok)
    for params, ours in ((params_a, first), (params_b, second)):
        logits = BertForSequenceClassification(config).apply(
            {"params": params}, b["input_ids"], b["token_type_ids"], b["attention_mask"])
        np.testing.assert_allclose(ours, jax.nn.softmax(logits, -1), atol=1e-6)
    assert np.abs(first - second).max() > 1e-3  # the second model really was used


@pytest.mark.parametrize("pooling,normalize", [("cls", False), ("mean", True)])
def test_embed_compiles_once_for_every_model_of_a_config(tiny, pooling, normalize):
    from bert_jax.models import BertModel
    config, tok, params_a, params_b = tiny
    first = inference.embed(config, params_a, tok, TINY_TEXTS, pooling, 16, 2, normalize)
    with backend_compiles() as compiles:
        second = inference.embed(config, params_b, tok, TINY_TEXTS, pooling, 16, 2, normalize)
    assert compiles == []
    b = encoded(tok)
    mask = b["attention_mask"][..., None].astype(np.float32)
    for params, ours in ((params_a, first), (params_b, second)):
        seq, _ = BertModel(config).apply({"params": params["bert"]}, b["input_ids"],
                                         b["token_type_ids"], b["attention_mask"])
        seq = np.asarray(seq)
        want = seq[:, 0] if pooling == "cls" else (seq * mask).sum(1) / mask.sum(1)
        if normalize:
            want = want / np.linalg.norm(want, axis=-1, keepdims=True)
        assert ours.shape == (5, 32) and ours.dtype == np.float32
        np.testing.assert_allclose(ours, want, atol=2e-6)
    assert np.abs(first - second).max() > 1e-3


def test_library_errors_name_parameters_not_flags(tiny):
    """The library speaks of its parameters; only bert_jax.cli turns them into flags."""
    from bert_jax.errors import BertJaxError
    config, tok, params, _ = tiny
    for call, needle in (
            (lambda: inference.predict_proba(config, params, tok, TINY_TEXTS, None, 16, 0),
             "batch_size: expected an integer ≥ 1, got 0"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "cls", 2),
             "max_length: expected an integer ≥ 3, got 2"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "max"),
             "pooling: expected cls or mean, got 'max'"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "cls", 30),
             "max_length: 30 is more than the model's max_position_embeddings (24)")):
        with pytest.raises(BertJaxError) as e:
            call()
        assert str(e.value) == needle
    _, warnings = inference.fit_length(config, tok, TINY_TEXTS, None, 100)
    assert warnings == ["max_length 100 is more than the model's 24 positions "
                        "(max_position_embeddings); using 24"]
