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
        chosen = _choose_tokens(key_choose, maskable, n_predict)
    else:
        chosen = _choose_words(key_choose, maskable, is_continuation.astype(bool), n_predict)

    # Chosen positions in ascending order first, the rest after; keep the first P.
    index = jnp.arange(length)
    order = jnp.argsort(jnp.where(chosen, index, length + index), axis=-1)  # (B, L)
    if num_predictions > length:
        order = jnp.pad(order, ((0, 0), (0, num_predictions - length)))
    order = order[:, :num_predictions]  # (B, P)
    weights = jnp.arange(num_predictions) < chosen.sum(axis=-1, keepdims=True)  # (B, P)
    positions = jnp.where(weights, order, 0).astype(jnp.int32)
    labels = jnp.where(weights, jnp.take_along_axis(input_ids, positions, axis=-1), 0)

    action = jax.random.uniform(key_action, (batch_size, length))  # (B, L)
    random_ids = jax.random.randint(key_random, (batch_size, length), 0, vocab_size)
    corrupted = jnp.where(action < 0.8, mask_token_id,
                          jnp.where(action < 0.9, random_ids, input_ids))
    masked_ids = jnp.where(chosen, corrupted, input_ids).astype(input_ids.dtype)
    return {"input_ids": masked_ids, "masked_lm_positions": positions,
            "masked_lm_ids": labels.astype(jnp.int32),
            "masked_lm_weights": weights.astype(jnp.float32)}


def _choose_tokens(key, maskable, n_predict):
    """(B, L) bool: a uniformly random set of n_predict maskable tokens per row."""
    scores = jnp.where(maskable, jax.random.uniform(key, maskable.shape), 2.0)  # (B, L)
    # rank = position in a random order; argsort is stable, so ties cannot choose extra tokens
    rank = jnp.argsort(jnp.argsort(scores, axis=-1), axis=-1)  # (B, L)
    return maskable & (rank < n_predict[:, None])


def _choose_words(key, maskable, is_continuation, n_predict):
    """(B, L) bool: whole words in random order, each added only if it still fits in n_predict."""
    batch_size, length = maskable.shape
    prev_maskable = jnp.pad(maskable[:, :-1], ((0, 0), (1, 0)))  # (B, L)
    starts = maskable & ~(is_continuation & prev_maskable)  # first piece of each word
    word_id = jnp.clip(jnp.cumsum(starts, axis=-1) - 1, 0, length - 1)  # (B, L), per token
    word_len = jax.vmap(lambda w, m: jnp.zeros(length, jnp.int32).at[w].add(m))(
        word_id, maskable.astype(jnp.int32))  # (B, W = L) pieces per word
    n_words = starts.sum(axis=-1, keepdims=True)  # (B, 1)
    scores = jnp.where(jnp.arange(length) < n_words,
                       jax.random.uniform(key, (batch_size, length)), 2.0)  # (B, W)
    word_order = jnp.argsort(scores, axis=-1)  # (B, W) random order, empty slots last
    ordered_len = jnp.take_along_axis(word_len, word_order, axis=-1)  # (B, W)

    def add_word(count, piece_count):  # count, piece_count: (B,)
        take = (piece_count > 0) & (count + piece_count <= n_predict)
        return count + jnp.where(take, piece_count, 0), take

    _, take = jax.lax.scan(add_word, jnp.zeros(batch_size, jnp.int32), ordered_len.T)
    take = take.T  # (B, W) in word_order
    word_chosen = jnp.take_along_axis(take, jnp.argsort(word_order, axis=-1), axis=-1)  # (B, W)
    return maskable & jnp.take_along_axis(word_chosen, word_id, axis=-1)

