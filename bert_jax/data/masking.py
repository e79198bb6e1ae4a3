"""BERT's 80/10/10 masked-LM corruption as a pure, jittable function (dynamic masking).

It runs inside the jitted train step with `jax.random.fold_in(key, step)`, so every epoch sees
new masks and a resumed run draws the same masks as an uninterrupted one. Shapes are fixed:
B sequences of length L give P = max_predictions_per_seq predictions each, padded with weight 0.

Semantics follow the original create_pretraining_data, with one deliberate difference: the
number to predict is counted over maskable tokens (not [CLS]/[SEP]/[PAD]),
n = min(P, max(1, round(n_real · masked_lm_prob))), so exactly 15% of real tokens are chosen
(the original also counts [CLS] and [SEP], about +0.4 points at L = 128).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from bert_jax.errors import BertJaxError


@dataclasses.dataclass(frozen=True)
class MaskingSpec:
    """What masking needs to know about the vocabulary; hashable, so it can be a static argument."""

    vocab_size: int  # random replacements are drawn uniformly from [0, vocab_size)
    mask_token_id: int
    never_mask_ids: tuple  # token ids never chosen: [PAD], [CLS], [SEP]
    max_predictions_per_seq: int = 20  # P
    masked_lm_prob: float = 0.15
    whole_word: bool = False  # choose all pieces of a word together (needs continuation_lookup)

    @classmethod
    def from_tokenizer(cls, tokenizer, max_predictions_per_seq: int = 20,
                       masked_lm_prob: float = 0.15, whole_word: bool = False) -> "MaskingSpec":
        ids = {t: tokenizer.token_to_id(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")}
        for token, i in ids.items():
            if i is None:
                raise BertJaxError(f"tokenizer: vocabulary has no {token} token; masking needs it")
        if not isinstance(max_predictions_per_seq, int) or max_predictions_per_seq < 1:
            raise BertJaxError(f"max_predictions_per_seq: expected an integer ≥ 1, got "
                               f"{max_predictions_per_seq!r}")
        if not 0.0 < masked_lm_prob < 1.0:
            raise BertJaxError(f"masked_lm_prob: expected a probability in (0, 1), got "
                               f"{masked_lm_prob!r}")
        return cls(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
                   mask_token_id=ids["[MASK]"],
                   never_mask_ids=(ids["[PAD]"], ids["[CLS]"], ids["[SEP]"]),
                   max_predictions_per_seq=max_predictions_per_seq,
                   masked_lm_prob=masked_lm_prob, whole_word=whole_word)


def mask_batch(key: jax.Array, batch: dict, spec: MaskingSpec,
               continuation_lookup: Optional[jax.Array] = None) -> dict:
    """Mask a pretraining batch: `batch` with input_ids replaced by the corrupted ids and
    masked_lm_positions / masked_lm_ids / masked_lm_weights (B, P) added.

    Never chosen: padding (attention_mask 0) and `spec.never_mask_ids`. For whole-word masking
    pass `continuation_lookup`, the (V,) bool table of `##` pieces from
    `bert_jax.tokenizer.continuation_lookup(tokenizer)`.
    """
    ids = batch["input_ids"]  # (B, L)
    special = batch["attention_mask"] == 0
    for token_id in spec.never_mask_ids:
        special = special | (ids == token_id)
    is_continuation = None
    if spec.whole_word:
        if continuation_lookup is None:
            raise BertJaxError("whole_word masking needs continuation_lookup (see "
                               "bert_jax.tokenizer.continuation_lookup)")
        is_continuation = jnp.asarray(continuation_lookup)[ids]  # (B, L)
    masked = mask_tokens(key, ids, special, vocab_size=spec.vocab_size,
                         mask_token_id=spec.mask_token_id,
                         max_predictions_per_seq=spec.max_predictions_per_seq,
                         masked_lm_prob=spec.masked_lm_prob, is_continuation=is_continuation)
    return {**batch, **masked}


def mask_tokens(key: jax.Array, input_ids: jax.Array, special_mask: jax.Array, *,
                vocab_size: int, mask_token_id: int, max_predictions_per_seq: int,
                masked_lm_prob: float = 0.15,
                is_continuation: Optional[jax.Array] = None) -> dict[str, jax.Array]:
    """Choose n = min(P, max(1, round(n_real · p))) tokens per sequence; of those 80% → [MASK],
    10% → a uniformly random vocabulary id, 10% unchanged.

    Args:
      key: PRNG key, e.g. `jax.random.fold_in(key, step)`.
      input_ids: (B, L) int token ids.
      special_mask: (B, L) bool, True where a token must never be chosen ([CLS], [SEP], [PAD]).
      is_continuation: optional (B, L) bool, True for `##` pieces; given, whole words are chosen
        (a word is a maskable token plus the continuation pieces right after it), adding words
        in random order while they fit in n, as the original's whole-word mode.
    Returns:
      input_ids (B, L) corrupted; masked_lm_positions (B, P) int32, chosen positions ascending
      then 0; masked_lm_ids (B, P) int32, original ids there (0 on padding); masked_lm_weights
      (B, P) float32, 1.0 for a real prediction and 0.0 for padding.
    """
    batch_size, length = input_ids.shape
    num_predictions = max_predictions_per_seq  # P
    key_choose, key_action, key_random = jax.random.split(key, 3)
    maskable = ~special_mask.astype(bool)  # (B, L)
    n_real = maskable.sum(axis=-1)  # (B,)
    # n_real → n to predict, a trace-time table: Python's round in float64, as the original
    table = [min(num_predictions, max(1, round(n * masked_lm_prob))) if n else 0
             for n in range(length + 1)]
    n_predict = jnp.asarray(table, jnp.int32)[n_real]  # (B,)

    if is_continuation is None:
        positions, count = _choose_tokens(key_choose, maskable, n_predict, num_predictions)
    else:
        chosen = _choose_words(key_choose, maskable, is_continuation.astype(bool), n_predict)
        positions, count = _ascending_positions(chosen, num_predictions)
    weights = jnp.arange(positions.shape[1]) < count[:, None]  # (B, K), K = min(P, L)
    positions = jnp.where(weights, positions, 0).astype(jnp.int32)
    labels = jnp.where(weights, jnp.take_along_axis(input_ids, positions, axis=-1), 0)

    # 80/10/10 drawn per prediction slot (B, K), then written back to the chosen positions
    action = jax.random.uniform(key_action, positions.shape)
    random_ids = jax.random.randint(key_random, positions.shape, 0, vocab_size)
    corrupted = jnp.where(action < 0.8, mask_token_id, jnp.where(action < 0.9, random_ids, labels))
    rows = jnp.arange(batch_size)[:, None]
    masked_ids = input_ids.at[rows, jnp.where(weights, positions, length)].set(
        corrupted.astype(input_ids.dtype), mode="drop")  # padding slots write nothing

    pad = ((0, 0), (0, num_predictions - positions.shape[1]))  # P > L: pad to P
    return {"input_ids": masked_ids, "masked_lm_positions": jnp.pad(positions, pad),
            "masked_lm_ids": jnp.pad(labels, pad).astype(jnp.int32),
            "masked_lm_weights": jnp.pad(weights, pad).astype(jnp.float32)}


def _choose_tokens(key, maskable, n_predict, num_predictions):
    """A uniformly random set of n_predict maskable tokens per row: (B, K) positions, ascending
    in the first n_predict slots (the rest are past the end), and (B,) their count.

    The n_predict highest of i.i.d. uniform scores (non-maskable tokens score -1), by one
    partial sort (top_k) of K = min(P, L) rather than a full sort of L.
    """
    length = maskable.shape[1]
    scores = jnp.where(maskable, jax.random.uniform(key, maskable.shape), -1.0)  # (B, L)
    _, top = jax.lax.top_k(scores, min(num_predictions, length))  # (B, K) distinct, best first
    keep = jnp.arange(top.shape[1]) < n_predict[:, None]  # n_predict ≤ n_real: all maskable
    return jnp.sort(jnp.where(keep, top, length), axis=-1), n_predict


def _ascending_positions(chosen, num_predictions):
    """(B, L) bool → (B, K) the first K = min(P, L) chosen positions ascending, and (B,) count."""
    length = chosen.shape[1]
    rank = jnp.where(chosen, jnp.cumsum(chosen, axis=-1) - 1, -1)  # (B, L)
    slots = jnp.arange(min(num_predictions, length))
    hit = rank[:, None, :] == slots[:, None]  # (B, K, L): slot k holds the k-th chosen position
    positions = jnp.where(hit, jnp.arange(length), 0).sum(axis=-1)  # (B, K)
    return positions, jnp.minimum(chosen.sum(axis=-1), len(slots))


def _random_order(key, shape):
    """(B, W) int32: each row a uniformly random permutation of 0 … W-1.

    One single-operand sort of distinct uint32 keys (random bits above, the index below, so
    ties among the random bits fall to the lower index, as a stable argsort would): on CPU
    several times faster than argsort, which sorts (key, index) pairs with a general comparator.
    """
    width = shape[1]
    shift = max(1, (width - 1).bit_length())  # low bits hold the index
    keys = jax.random.bits(key, shape, jnp.uint32) >> shift << shift
    keys = keys | jnp.arange(width, dtype=jnp.uint32)
    return (jnp.sort(keys, axis=-1) & jnp.uint32((1 << shift) - 1)).astype(jnp.int32)


def _choose_words(key, maskable, is_continuation, n_predict):
    """(B, L) bool: whole words in random order, each added only if it still fits in n_predict."""
    batch_size, length = maskable.shape
    prev_maskable = jnp.pad(maskable[:, :-1], ((0, 0), (1, 0)))  # (B, L)
    starts = maskable & ~(is_continuation & prev_maskable)  # first piece of each word
    word_id = jnp.clip(jnp.cumsum(starts, axis=-1) - 1, 0, length - 1)  # (B, L), per token
    word_len = jax.vmap(lambda w, m: jnp.zeros(length, jnp.int32).at[w].add(m))(
        word_id, maskable.astype(jnp.int32))  # (B, W = L) pieces per word
    word_order = _random_order(key, (batch_size, length))  # (B, W); empty slots add nothing
    ordered_len = jnp.take_along_axis(word_len, word_order, axis=-1)  # (B, W)

    def add_word(count, piece_count):  # count, piece_count: (B,)
        take = (piece_count > 0) & (count + piece_count <= n_predict)
        return count + jnp.where(take, piece_count, 0), take

    _, take = jax.lax.scan(add_word, jnp.zeros(batch_size, jnp.int32), ordered_len.T)
    rows = jnp.arange(batch_size)[:, None]
    word_chosen = jnp.zeros_like(take.T).at[rows, word_order].set(take.T)  # (B, W) by word id
    return maskable & jnp.take_along_axis(word_chosen, word_id, axis=-1)
