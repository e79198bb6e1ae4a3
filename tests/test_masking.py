"""Masking statistics over > 1M real tokens (the bundled corpus, released vocabulary)."""

import glob
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax import tokenizer as tok_lib
from bert_jax.errors import BertJaxError
from bert_jax.masking import MaskingSpec, mask_batch, mask_tokens

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, P = 128, 20
PAD, CLS, SEP, MASK = 0, 101, 102, 103

masker = jax.jit(mask_batch, static_argnames="spec")  # one compile per spec, shared by the tests


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return tok_lib.load(os.path.join(minilm_dir, "vocab.txt"))


@pytest.fixture(scope="module")
def batch(tokenizer):
    """Consecutive paragraphs of the six novels as [CLS] A [SEP] B [SEP] pairs, padded to L."""
    paragraphs = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "austen", "*.txt"))):
        text = open(path, encoding="utf-8").read()
        paragraphs += [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    out = tok_lib.encode_batch(tokenizer, paragraphs[:-1], paragraphs[1:], max_length=L, pad=True)
    out["next_sentence_labels"] = np.zeros(len(paragraphs) - 1, np.int32)
    return out


def _chosen(out):
    """(B, L) bool of chosen positions, from masked_lm_positions / weights."""
    chosen = np.zeros(out["input_ids"].shape, bool)
    rows, cols = np.nonzero(out["masked_lm_weights"])
    chosen[rows, out["masked_lm_positions"][rows, cols]] = True
    return chosen


def _run(spec, batch, key, lookup=None):
    out = masker(key, batch, spec, lookup)
    return {k: np.asarray(v) for k, v in out.items()}


def test_80_10_10_over_a_million_tokens(tokenizer, batch):
    spec = MaskingSpec.from_tokenizer(tokenizer, max_predictions_per_seq=P)
    assert spec.vocab_size == 30522 and spec.mask_token_id == MASK
    out = _run(spec, batch, jax.random.fold_in(jax.random.key(0), 7))
    ids, attention = batch["input_ids"], batch["attention_mask"]
    maskable = (attention == 1) & (ids != CLS) & (ids != SEP)
    assert maskable.sum() > 1_000_000

    for key, dtype in (("masked_lm_positions", np.int32), ("masked_lm_ids", np.int32),
                       ("masked_lm_weights", np.float32)):
        assert out[key].shape == (len(ids), P) and out[key].dtype == dtype, key
    chosen = _chosen(out)
    fraction = chosen.sum() / maskable.sum()
    assert abs(fraction - 0.15) < 0.003, fraction
    assert not (chosen & ~maskable).any()  # never [CLS], [SEP] or padding
    expected = [min(P, max(1, round(n * 0.15))) for n in maskable.sum(1)]  # the original's
    np.testing.assert_array_equal(out["masked_lm_weights"].sum(1), expected)

    # positions ascending and distinct, labels the original ids, zero padding
    positions, weights = out["masked_lm_positions"], out["masked_lm_weights"] > 0
    assert (np.diff(np.where(weights, positions, L + np.arange(P)), axis=1) > 0).all()
    np.testing.assert_array_equal(out["masked_lm_ids"],
                                  np.where(weights, np.take_along_axis(ids, positions, 1), 0))
    assert (positions[~weights] == 0).all()

    new = out["input_ids"]
    assert (new[~chosen] == ids[~chosen]).all()
    became_mask = (new[chosen] == MASK).mean()
    kept = (new[chosen] == ids[chosen]).mean()
    random = 1 - became_mask - kept
    print(f"chosen {fraction:.4f} of {maskable.sum()} tokens; [MASK] {became_mask:.4f}, "
          f"random {random:.4f}, kept {kept:.4f}")
    assert abs(became_mask - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(random - 0.1) < 0.01
    replaced = new[chosen & (new != MASK) & (new != ids)]
    assert replaced.min() >= 0 and replaced.max() < 30522 and len(np.unique(replaced)) > 10_000
    for key in ("token_type_ids", "attention_mask", "next_sentence_labels"):
        np.testing.assert_array_equal(out[key], batch[key])  # carried through untouched

    # dynamic masking: the same key gives the same masks, another step's key new ones
    again = _run(spec, batch, jax.random.fold_in(jax.random.key(0), 7))
    for key in out:
        np.testing.assert_array_equal(again[key], out[key])
    other = _run(spec, batch, jax.random.fold_in(jax.random.key(0), 8))
    assert (other["masked_lm_positions"] != out["masked_lm_positions"]).mean() > 0.5


def test_whole_word_masking_never_splits_a_word(tokenizer, batch):
    spec = MaskingSpec.from_tokenizer(tokenizer, max_predictions_per_seq=P, whole_word=True)
    lookup = tok_lib.continuation_lookup(tokenizer)
    out = _run(spec, batch, jax.random.key(1), lookup)
    ids, attention = batch["input_ids"], batch["attention_mask"]
    maskable = (attention == 1) & (ids != CLS) & (ids != SEP)
    chosen = _chosen(out)
    assert not (chosen & ~maskable).any()
    continues = lookup[ids] & maskable & np.roll(maskable, 1, axis=1)  # a ## piece inside a word
    continues[:, 0] = False
    assert continues.sum() > 40_000
    # every continuation piece is chosen exactly when the piece before it is
    np.testing.assert_array_equal(chosen[:, 1:][continues[:, 1:]], chosen[:, :-1][continues[:, 1:]])
    multi_piece = (chosen[:, 1:] & continues[:, 1:]).sum()
    assert multi_piece > 4_000  # whole multi-piece words really are chosen
    budget = np.array([min(P, max(1, round(n * 0.15))) for n in maskable.sum(1)])
    assert (chosen.sum(1) <= budget).all()
    fraction = chosen.sum() / maskable.sum()
    print(f"whole-word: chosen {fraction:.4f}, {multi_piece} of {continues.sum()} "
          f"continuation pieces among them")
    assert 0.145 < fraction <= 0.15 + 0.003
    became_mask = (out["input_ids"][chosen] == MASK).mean()
    assert abs(became_mask - 0.8) < 0.01


def test_edge_cases():
    ids = jnp.array([[CLS, SEP, PAD, PAD], [CLS, 7, SEP, PAD]])  # no maskable token; one
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    out = mask_tokens(jax.random.key(0), ids, special, vocab_size=200, mask_token_id=MASK,
                      max_predictions_per_seq=6)  # P > L: padded to P
    assert out["masked_lm_positions"].shape == (2, 6)
    assert out["masked_lm_weights"].tolist() == [[0.0] * 6, [1.0] + [0.0] * 5]
    assert out["masked_lm_positions"].tolist() == [[0] * 6, [1] + [0] * 5]
    assert out["masked_lm_ids"].tolist() == [[0] * 6, [7] + [0] * 5]
    assert out["input_ids"][0].tolist() == [CLS, SEP, PAD, PAD]


def test_whole_word_needs_the_lookup(tokenizer):
    spec = MaskingSpec.from_tokenizer(tokenizer, whole_word=True)
    batch = {"input_ids": jnp.ones((1, 4), jnp.int32), "attention_mask": jnp.ones((1, 4))}
    with pytest.raises(BertJaxError, match="continuation_lookup"):
        mask_batch(jax.random.key(0), batch, spec)
    with pytest.raises(BertJaxError, match="max_predictions_per_seq"):
        MaskingSpec.from_tokenizer(tokenizer, max_predictions_per_seq=0)
