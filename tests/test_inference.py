"""Using models: fill-mask top-k and embeddings against transformers on the real MiniLM encoder."""

import contextlib
import os
import shutil

import numpy as np
import pytest

from bert_jax import cli
from bert_jax import inference
from bert_jax.tasks import classification, token_classification

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


MASKED = ["the [MASK] sat on the mat.", "[MASK] is the capital of France, and a large city.",
          "she [MASK] a long letter to her sister about the ball, the [MASK] and the weather.",
          "a [MASK]"]


def test_fill_masks_of_a_file_match_transformers_text_by_text(mlm_dir, tmp_path, capsys):
    """Texts of mixed lengths batched by length: each text's top k as transformers gives for
    that text alone, in input order, from the library and from `fill-mask --input`."""
    import json

    import torch
    import transformers
    path, hf = mlm_dir
    hf_tok = transformers.AutoTokenizer.from_pretrained(path)
    config, params, tok = inference.load(str(path))
    ours = inference.fill_masks(config, params, tok, MASKED, top_k=4, batch_size=3)
    assert [len(m) for m in ours] == [1, 1, 2, 1]
    for text, masks in zip(MASKED, ours):
        enc = hf_tok(text, return_tensors="pt")
        with torch.no_grad():
            logits = hf(**enc).prediction_logits[0]
        positions = (enc["input_ids"][0] == hf_tok.mask_token_id).nonzero()[:, 0]
        for candidates, position in zip(masks, positions):
            top = torch.topk(torch.softmax(logits[position], -1), 4)
            assert [t for t, _ in candidates] == hf_tok.convert_ids_to_tokens(top.indices)
            np.testing.assert_allclose([p for _, p in candidates], top.values, atol=1e-5)
    alone = inference.fill_mask(config, params, tok, MASKED[2], top_k=4)  # one text, its length
    assert [[t for t, _ in m] for m in alone] == [[t for t, _ in m] for m in ours[2]]
    np.testing.assert_allclose([[p for _, p in m] for m in alone],
                               [[p for _, p in m] for m in ours[2]], atol=1e-7)
    source, out = tmp_path / "masked.txt", tmp_path / "top.jsonl"
    source.write_text("\n".join(MASKED) + "\n", encoding="utf-8")
    assert cli.main(["fill-mask", str(path), "--input", str(source), "--output", str(out),
                     "--top-k", "4", "--batch-size", "3"]) == 0
    assert "wrote the top 4 tokens of 5 masks in 4 texts" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in rows] == MASKED
    for r, masks in zip(rows, ours):
        assert [[c["token"] for c in m] for m in r["masks"]] == [[t for t, _ in m] for m in masks]
        np.testing.assert_allclose([[c["probability"] for c in m] for m in r["masks"]][0],
                                   [p for _, p in masks[0]], atol=1e-7)


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
    first = classification.predict_proba(config, params_a, tok, TINY_TEXTS, None, 16, 2)
    with backend_compiles() as compiles:
        second = classification.predict_proba(config, params_b, tok, TINY_TEXTS, None, 16, 2)
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
            (lambda: classification.predict_proba(config, params, tok, TINY_TEXTS, None, 16, 0),
             "batch_size: expected an integer ≥ 1, got 0"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "cls", 2),
             "max_seq_length: expected an integer ≥ 3, got 2"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "max"),
             "pooling: expected cls, mean or none, got 'max'"),
            (lambda: inference.embed(config, params, tok, TINY_TEXTS, "cls", 30),
             "max_seq_length: 30 is more than the model's max_position_embeddings (24)")):
        with pytest.raises(BertJaxError) as e:
            call()
        assert str(e.value) == needle
    _, warnings = inference.fit_length(config, tok, TINY_TEXTS, None, 100)
    assert warnings == ["max_seq_length 100 is more than the model's 24 positions "
                        "(max_position_embeddings); using 24"]


# -- features from any layers: the paper's feature-based approach ------------------------------

def hidden_states_by_hand(config, params, tok, length=16):
    """(hidden states (num_layers + 1 arrays (B, L, H)), attention mask) of TINY_TEXTS."""
    from bert_jax.models import BertModel
    b = encoded(tok, length)
    out = BertModel(config).apply({"params": params["bert"]}, b["input_ids"], b["token_type_ids"],
                                  b["attention_mask"], output_hidden_states=True)
    return [np.asarray(h) for h in out.hidden_states], b["attention_mask"]


@pytest.mark.parametrize("layers", [(-3, -2, -1), (2, 0), (-1,)], ids=str)
def test_embed_layers_concatenate_the_hidden_states_picked_by_hand(tiny, layers):
    config, tok, params, _ = tiny
    hidden, mask = hidden_states_by_hand(config, params, tok)
    assert len(hidden) == 3
    picked = np.concatenate([hidden[i] for i in layers], -1)  # (B, L, 32 × len(layers))
    m = mask[..., None].astype(np.float32)
    cls = inference.embed(config, params, tok, TINY_TEXTS, "cls", 16, 2, layers=layers)
    mean = inference.embed(config, params, tok, TINY_TEXTS, "mean", 16, 2, layers=layers)
    tokens = inference.embed(config, params, tok, TINY_TEXTS, "none", 16, 2, layers=layers)
    assert cls.shape == mean.shape == (5, 32 * len(layers)) and cls.dtype == np.float32
    np.testing.assert_allclose(cls, picked[:, 0], atol=2e-6)
    np.testing.assert_allclose(mean, (picked * m).sum(1) / m.sum(1), atol=2e-6)
    assert [t.shape for t in tokens] == [(n, 32 * len(layers)) for n in mask.sum(1)]
    for row, vectors, n in zip(picked, tokens, mask.sum(1)):
        np.testing.assert_allclose(vectors, row[:n], atol=2e-6)
    unit = inference.embed(config, params, tok, TINY_TEXTS, "none", 16, 2, True, layers)
    np.testing.assert_allclose(np.linalg.norm(unit[0], axis=-1), 1.0, atol=1e-6)
    if layers == (-1,):  # the last layer is the default
        np.testing.assert_allclose(cls, inference.embed(config, params, tok, TINY_TEXTS, "cls",
                                                        16, 2), atol=1e-6)
    names = inference.tokens_of(tok, TINY_TEXTS, 16)
    assert names[0] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert [len(t) for t in names] == [len(t) for t in tokens]


def test_embed_refuses_bad_layers_naming_them(tiny):
    from bert_jax.errors import BertJaxError
    config, tok, params, _ = tiny
    for layers, needle in (
            ((-4, -1), "layers: -4 is out of range: the model has 2 layers, so expected integers "
                       "from -3 to 2 (0 the embeddings, negative from the end)"),
            ((3,), "layers: 3 is out of range"),
            ((-1, 2), "layers: hidden state 2 is given twice ([-1, 2])"),
            ((1.0,), "layers: expected integers from -3 to 2"),
            ((True,), "layers: expected integers from -3 to 2"),
            ((), "layers: expected at least one of integers from -3 to 2"),
            ("-1", "layers: expected a list of integers from -3 to 2")):
        with pytest.raises(BertJaxError) as e:
            inference.embed(config, params, tok, TINY_TEXTS, "cls", 16, 2, layers=layers)
        assert str(e.value).startswith(needle), (layers, str(e.value))
    assert inference.check_layers(config, [np.int64(-3), 1, -1]) == (0, 1, 2)


@pytest.fixture(scope="module")
def tiny_dir(tiny, tmp_path_factory):
    """The first tiny model as our model directory, with its vocabulary."""
    from bert_jax.model_files.model_dir import save_model_dir
    config, _, params, _ = tiny
    root = tmp_path_factory.mktemp("tiny_model")
    (root / "vocab.txt").write_text("".join(w + "\n" for w in WORDS), encoding="utf-8")
    save_model_dir(str(root / "model"), config, params, [str(root / "vocab.txt")])
    return root / "model"


def test_cli_embed_layers_end_to_end(tiny, tiny_dir, tmp_path, capsys):
    import json
    config, tok, params, _ = tiny
    hidden, mask = hidden_states_by_hand(config, params, tok)
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TINY_TEXTS) + "\n")
    common = ["embed", str(tiny_dir), "--input", str(source), "--max-seq-length", "16",
              "--batch-size", "2"]
    out = tmp_path / "tokens.jsonl"
    assert cli.main(common + ["--output", str(out), "--layers", "-3,-2,-1", "--pooling",
                              "none"]) == 0
    assert "wrote 28 token vectors of 96 for 5 texts" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["tokens"] for r in rows] == inference.tokens_of(tok, TINY_TEXTS, 16)
    for r, h0, h1, h2, n in zip(rows, *hidden, mask.sum(1)):
        want = np.concatenate([h0, h1, h2], -1)[:n]
        np.testing.assert_allclose(np.asarray(r["vectors"], np.float32), want, atol=2e-6)
    out = tmp_path / "mean.npy"
    assert cli.main(common + ["--output", str(out), "--layers", "-1,0", "--pooling",
                              "mean"]) == 0
    m = mask[..., None].astype(np.float32)
    want = np.concatenate([hidden[2], hidden[0]], -1)
    vectors = np.load(out)
    assert vectors.shape == (5, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, (want * m).sum(1) / m.sum(1), atol=2e-6)
    assert "hidden states -1,0" in capsys.readouterr().out
    # the default output format without --layers: unchanged
    out = tmp_path / "cls.npy"
    assert cli.main(common + ["--output", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), hidden[2][:, 0], atol=2e-6)


# -- length buckets: padding is not computed, outputs equal the padded path's -----------------

def mixed_texts(n=11, seed=0):
    """Texts of 1 to 20 words (3 to 22 tokens) in shuffled order: two buckets at
    max_seq_length 24."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS[5:], size=int(k))) for k in rng.integers(1, 21, n)]


def test_bucket_lengths_are_few_and_fit_every_row():
    from bert_jax.data import buckets
    assert sorted({buckets.bucket_length(n, 128) for n in range(1, 129)}) == list(
        range(16, 129, 16))
    assert len({buckets.bucket_length(n, 512) for n in range(1, 513)}) == 16
    for n in range(1, 513):
        b = buckets.bucket_length(n, 512)
        assert n <= b and (b - n < 16 or b - n < n / 4), n
    assert buckets.bucket_length(120, 100) == 100  # never past max_seq_length
    lengths = np.array([5, 30, 3, 17, 16, 99, 4])
    batches = list(buckets.plan(lengths, 3, 100))
    # buckets 16, 32, 100; a compile costs 4096 positions, 1365 per row of 3: none is worth one
    assert [(n, length) for _, n, length in batches] == [(3, 100), (3, 100), (1, 100)]
    many = np.repeat(lengths, 100)
    batches = list(buckets.plan(many, 3, 100))  # many rows: every bucket is worth its compile
    assert sorted({length for _, _, length in batches}) == [16, 32, 100]
    assert sorted(np.concatenate([rows[:n] for rows, n, _ in batches])) == list(range(700))
    assert all(len(rows) == 3 for rows, _, _ in batches)  # the batch dimension never changes
    assert all(many[rows].max() <= length for rows, _, length in batches)
    assert buckets.merged([16] * 10 + [32] * 5 + [48, 128], 128) == [16] * 10 + [32] * 5 + [
        128, 128]


def test_bucketed_predictions_equal_the_padded_path_in_input_order(tiny):
    """predict_proba and every embed pooling on texts of mixed lengths: each batch computed at
    its bucket (one compile per bucket), results in input order equal to one padded batch's."""
    import jax

    from bert_jax.data import tokenizer
    from bert_jax.models import BertForSequenceClassification, BertModel
    from bert_jax.data import buckets
    config, tok, params, _ = tiny
    texts = mixed_texts(2000)  # enough batches at 16 tokens to be worth their compile
    b = tokenizer.encode_batch(tok, texts, None, 24, pad=True)
    inputs = (b["input_ids"], b["token_type_ids"], b["attention_mask"])
    assert len(set(b["attention_mask"].sum(1))) > 5
    with backend_compiles() as compiles:
        probs = classification.predict_proba(config, params, tok, texts, None, 24, 32)
    plan = list(buckets.plan(b["attention_mask"].sum(1), 32, 24))
    assert {length for _, _, length in plan} == {16, 24}
    assert len(compiles) == 2  # one per bucket
    logits = jax.jit(BertForSequenceClassification(config).apply)({"params": params}, *inputs)
    np.testing.assert_allclose(probs, jax.nn.softmax(logits, -1), atol=1e-5)
    hidden = jax.jit(lambda *x: BertModel(config).apply(
        {"params": params["bert"]}, *x, output_hidden_states=True).hidden_states)(*inputs)
    m = b["attention_mask"][..., None].astype(np.float32)
    picked = np.concatenate([hidden[0], hidden[-1]], -1)  # layers (0, -1)
    np.testing.assert_allclose(inference.embed(config, params, tok, texts, "cls", 24, 32,
                                               layers=(0, -1)), picked[:, 0], atol=1e-5)
    np.testing.assert_allclose(inference.embed(config, params, tok, texts, "mean", 24, 32,
                                               layers=(0, -1)),
                               (picked * m).sum(1) / m.sum(1), atol=1e-5)
    tokens = inference.embed(config, params, tok, texts, "none", 24, 32)
    for vectors, row, n in zip(tokens, np.asarray(hidden[-1]), b["attention_mask"].sum(1)):
        assert vectors.shape == (n, 32)
        np.testing.assert_allclose(vectors, row[:n], atol=1e-5)


def test_bucketed_word_tags_equal_the_padded_path(tiny):
    import jax

    from bert_jax.tasks.token_classification import data as tagging
    from bert_jax.models import BertForTokenClassification
    config, tok, _, _ = tiny
    config = config.replace(id2label=("O", "B-X", "I-X", "B-Y"))
    ids = np.ones((1, 8), np.int32)
    params = BertForTokenClassification(config).init(jax.random.key(3), ids, ids, ids)["params"]
    sentences = [t.split() for t in mixed_texts(seed=1)]
    feats = tagging.encode(tok, sentences, 24)
    logits = BertForTokenClassification(config).apply(
        {"params": params}, *(feats[k] for k in ("input_ids", "token_type_ids",
                                                 "attention_mask")))
    want = tagging.word_predictions(np.asarray(logits), feats, len(sentences),
                                    [len(s) for s in sentences])
    tags = token_classification.tag_words(config, params, tok, sentences, 24, 3)
    assert tags == [[config.id2label[int(i)] for i in row] for row in want]
