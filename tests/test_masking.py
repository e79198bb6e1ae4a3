"""Masking statistics over > 1M real tokens (the bundled corpus, released vocabulary)."""

import glob
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.data import tokenizer as tok_lib
from bert_jax.errors import BertJaxError
from bert_jax.data.masking import MaskingSpec, mask_batch, mask_tokens

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
    out = tok_lib.encode_batch(tokenizer, paragraphs[:-1], paragraphs[1:], max_seq_length=L,
                              pad=True)
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


def _chi_square_ok(counts, expected):
    """Pearson's chi-square against `expected`, under df + 5·sqrt(2·df) (about p = 1e-4)."""
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    stat = ((counts - expected) ** 2 / expected).sum()
    df = len(counts) - 1
    return stat < df + 5 * np.sqrt(2 * df), stat


def test_chosen_positions_are_distinct_candidates_of_the_right_count():
    rng = np.random.default_rng(0)
    n_rows, length, p = 3000, 24, 6
    ids = rng.integers(200, 1000, (n_rows, length))
    lengths = rng.integers(0, length + 1, n_rows)  # some rows all padding, some full
    ids[np.arange(length) >= lengths[:, None]] = PAD
    ids[:, 0] = np.where(lengths > 0, CLS, PAD)
    ids[rng.random((n_rows, length)) < 0.1] = SEP  # specials anywhere, never chosen
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    out = jax.jit(lambda k, i, s: mask_tokens(k, i, s, vocab_size=1000, mask_token_id=MASK,
                                                max_predictions_per_seq=p, masked_lm_prob=0.3))(
        jax.random.key(3), jnp.asarray(ids), jnp.asarray(special))
    out = {k: np.asarray(v) for k, v in out.items()}
    weights = out["masked_lm_weights"] > 0
    expected = [min(p, max(1, round(n * 0.3))) if n else 0 for n in (~special).sum(1)]
    np.testing.assert_array_equal(weights.sum(1), expected)
    assert (weights == (np.arange(p) < weights.sum(1, keepdims=True))).all()  # real slots first
    positions = out["masked_lm_positions"]
    assert (np.diff(np.where(weights, positions, length + np.arange(p)), axis=1) > 0).all()
    assert (positions[~weights] == 0).all()
    chosen = _chosen(out)
    assert chosen.sum() == weights.sum()  # distinct
    assert not (chosen & special).any()  # within the candidates
    assert (out["input_ids"][~chosen] == ids[~chosen]).all()
    np.testing.assert_array_equal(out["masked_lm_ids"],
                                  np.where(weights, np.take_along_axis(ids, positions, 1), 0))


def test_every_subset_of_candidates_is_equally_likely():
    # [CLS] a b [SEP] c d e [SEP] f g h [PAD]: 8 candidates, round(8 · 0.3) = 2 chosen
    row = np.array([CLS, 1, 2, SEP, 3, 4, 5, SEP, 6, 7, 8, PAD])
    candidates = [1, 2, 4, 5, 6, 8, 9, 10]
    n_rows = 28 * 2000
    ids = jnp.asarray(np.tile(row, (n_rows, 1)))
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    out = jax.jit(lambda k, i, s: mask_tokens(k, i, s, vocab_size=200, mask_token_id=MASK,
                                                max_predictions_per_seq=4, masked_lm_prob=0.3))(
        jax.random.key(11), ids, special)  # arguments, not closed-over constants XLA would fold
    weights = np.asarray(out["masked_lm_weights"])
    assert (weights.sum(1) == 2).all()
    pairs = np.asarray(out["masked_lm_positions"])[:, :2]
    index = {(a, b): i for i, (a, b) in enumerate(
        (a, b) for j, a in enumerate(candidates) for b in candidates[j + 1:])}
    counts = np.bincount([index[(a, b)] for a, b in pairs.tolist()], minlength=len(index))
    ok, stat = _chi_square_ok(counts, np.full(len(index), n_rows / len(index)))
    assert len(index) == 28 and ok, (stat, counts)


def test_whole_words_follow_the_random_order_greedy_distribution():
    # five words of 1, 2, 1, 3, 1 pieces (8 pieces: n = round(8 · 0.45) = 4); words join in a
    # uniformly random order while they fit, so the chosen set's law is that over all 5! orders
    import itertools
    lengths = [1, 2, 1, 3, 1]
    starts = np.cumsum([1] + lengths[:-1])  # after [CLS]
    row = np.array([CLS] + list(range(10, 18)) + [SEP, PAD, PAD])
    continuation = np.zeros(len(row), bool)
    for s, n in zip(starts, lengths):
        continuation[s + 1:s + n] = True
    law = {}
    for order in itertools.permutations(range(5)):
        count, taken = 0, []
        for w in order:
            if count + lengths[w] <= 4:
                count, taken = count + lengths[w], taken + [w]
        law[tuple(sorted(taken))] = law.get(tuple(sorted(taken)), 0) + 1
    n_rows = 120 * 400
    ids = jnp.asarray(np.tile(row, (n_rows, 1)))
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    out = jax.jit(lambda k, i, s, c: mask_tokens(
        k, i, s, vocab_size=200, mask_token_id=MASK, max_predictions_per_seq=5,
        masked_lm_prob=0.45, is_continuation=c))(
        jax.random.key(5), ids, special, jnp.asarray(np.tile(continuation, (n_rows, 1))))
    chosen = _chosen({k: np.asarray(v) for k, v in out.items()})
    word_chosen = chosen[:, starts]
    for s, n in zip(starts, lengths):  # whole words only
        assert (chosen[:, s:s + n] == word_chosen[:, [list(starts).index(s)]]).all()
    seen = {}
    for taken in map(tuple, word_chosen):
        key = tuple(np.flatnonzero(taken))
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(law), set(seen) - set(law)
    keys = sorted(law)
    ok, stat = _chi_square_ok([seen.get(k, 0) for k in keys],
                              [law[k] / 120 * n_rows for k in keys])
    assert ok, (stat, seen, law)
