"""Model: the paper's parameter counts, original init, masking, dropout, heads, dtypes.

The kernels in bert_jax.models.ops are tested against the library ops they replace in
test_ops_reference.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax import (BertConfig, BertForMaskedLM, BertForPreTraining,
                      BertForSequenceClassification, BertModel)
from bert_jax.models.encoder import Embeddings
from bert_jax.models.heads import MlmHead

TINY = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=24)


def count(tree):
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def batch(config=TINY, B=3, L=9, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, config.vocab_size, (B, L)).astype(np.int32)
    mask = np.ones((B, L), np.int32)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    ids[mask == 0] = 0
    types = np.zeros((B, L), np.int32)
    types[:, 4:] = 1
    return ids, types, mask


@pytest.mark.parametrize("name,expected", [("base", 109_482_240), ("large", 335_141_888)])
def test_parameter_count_equals_paper(name, expected):
    ids = jnp.zeros((1, 8), jnp.int32)
    shapes = jax.eval_shape(lambda: BertModel(BertConfig.preset(name)).init(
        jax.random.key(0), ids))
    assert count(shapes) == expected


def test_init_is_the_originals():
    config = TINY.replace(vocab_size=4000, hidden_size=128, intermediate_size=512)
    params = BertForPreTraining(config).init(jax.random.key(0), *batch(config))["params"]
    emb = np.asarray(params["bert"]["embeddings"]["word_embeddings"]["embedding"])
    # normal(0, 0.02) truncated at ±2σ has standard deviation 0.02 × 0.8796
    assert np.abs(emb).max() <= 0.04 + 1e-7
    assert abs(emb.std() - 0.02 * 0.8796) < 0.0005 and abs(emb.mean()) < 0.0005
    layer = params["bert"]["encoder"]["layer_0"]
    assert np.all(np.asarray(layer["attention"]["layer_norm"]["scale"]) == 1)
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    for path, leaf in flat:
        if jax.tree_util.keystr(path).endswith("['bias']"):
            assert np.all(np.asarray(leaf) == 0), path
        assert leaf.dtype == jnp.float32


def test_padding_is_never_attended():
    ids, types, mask = batch()
    params = BertModel(TINY).init(jax.random.key(0), ids, types, mask)
    seq, pooled = BertModel(TINY).apply(params, ids, types, mask)
    assert seq.shape == (3, 9, 32) and pooled.shape == (3, 32)
    ids2 = ids.copy()
    ids2[mask == 0] = 55  # change only what sits under padding
    seq2, pooled2 = BertModel(TINY).apply(params, ids2, types, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(seq2)[real], np.asarray(seq)[real], atol=1e-6)
    np.testing.assert_allclose(pooled2, pooled, atol=1e-6)
    # and a row's output does not depend on how much padding follows it
    seq3, _ = BertModel(TINY).apply(params, ids[2:, :3], types[2:, :3], mask[2:, :3])
    np.testing.assert_allclose(seq3[0], seq[2, :3], atol=1e-5)


def test_dropout_only_when_not_deterministic():
    ids, types, mask = batch()
    model = BertForSequenceClassification(TINY)
    params = model.init(jax.random.key(0), ids, types, mask)
    a = model.apply(params, ids, types, mask)
    b = model.apply(params, ids, types, mask, rngs={"dropout": jax.random.key(1)})
    np.testing.assert_array_equal(a, b)
    run = lambda k: model.apply(params, ids, types, mask, deterministic=False,  # noqa: E731
                                rngs={"dropout": jax.random.key(k)})
    np.testing.assert_array_equal(run(3), run(3))
    assert np.abs(np.asarray(run(3)) - np.asarray(run(4))).max() > 1e-4


def test_mlm_at_positions_equals_all_positions_gathered_and_decoder_is_tied():
    ids, types, mask = batch()
    model = BertForPreTraining(TINY)
    params = model.init(jax.random.key(0), ids, types, mask)["params"]
    assert set(params) == {"bert", "predictions", "seq_relationship"}
    assert "decoder" not in params["predictions"]  # tied: the word embeddings are the decoder
    positions = np.array([[0, 5, 8], [1, 2, 3], [2, 2, 0]], np.int32)
    mlm, nsp = model.apply({"params": params}, ids, types, mask, positions)
    full, nsp_full = model.apply({"params": params}, ids, types, mask)
    assert mlm.shape == (3, 3, 101) and full.shape == (3, 9, 101) and nsp.shape == (3, 2)
    np.testing.assert_allclose(mlm, np.take_along_axis(np.asarray(full), positions[..., None], 1),
                               atol=1e-6)
    np.testing.assert_array_equal(nsp, nsp_full)
    # the logits are exactly transform(h) · Eᵀ + bias
    emb = params["bert"]["embeddings"]["word_embeddings"]["embedding"]
    bumped = jax.tree.map(lambda x: x, params)
    bumped["predictions"]["bias"] = params["predictions"]["bias"].at[7].add(3.0)
    mlm2, _ = model.apply({"params": bumped}, ids, types, mask, positions)
    np.testing.assert_allclose(mlm2[..., 7] - mlm[..., 7], 3.0, atol=1e-5)
    assert emb.shape == (101, 32)


def test_last_layer_at_positions_equals_the_full_output_gathered():
    """output_positions: the last layer at those rows only, the same numbers; the task models
    that read only [CLS] or the masked positions use it in forward passes, and the pretraining
    models in training too ([CLS] and the masked positions)."""
    from bert_jax.models.task_models import BertForMultipleChoice
    ids, types, mask = batch()
    params = BertForPreTraining(TINY).init(jax.random.key(0), ids, types, mask)["params"]
    positions = np.array([[0, 5], [1, 2], [2, 0]], np.int32)
    full = BertModel(TINY).apply({"params": params["bert"]}, ids, types, mask,
                                 output_hidden_states=True, output_attentions=True)
    at = BertModel(TINY).apply({"params": params["bert"]}, ids, types, mask,
                               output_hidden_states=True, output_attentions=True,
                               output_positions=positions)
    pick = lambda x: np.take_along_axis(np.asarray(x), positions[..., None], 1)  # noqa: E731
    assert at.sequence_output.shape == (3, 2, 32)
    np.testing.assert_allclose(at.sequence_output, pick(full.sequence_output), atol=1e-6)
    np.testing.assert_allclose(at.hidden_states[-1], at.sequence_output, atol=0)
    np.testing.assert_allclose(at.hidden_states[1], full.hidden_states[1], atol=1e-6)
    np.testing.assert_allclose(at.attentions[-1], np.take_along_axis(
        np.asarray(full.attentions[-1]), positions[:, None, :, None], 2), atol=1e-6)
    cls = BertModel(TINY).apply({"params": params["bert"]}, ids, types, mask,
                                output_positions=np.zeros((3, 1), np.int32))
    np.testing.assert_allclose(cls[1], full.pooled_output, atol=1e-6)  # BERT's pooled output
    mlm = BertForMaskedLM(TINY).apply({"params": params}, ids, types, mask, positions)
    mlm_full = BertForPreTraining(TINY).apply({"params": params}, ids, types, mask, positions)[0]
    np.testing.assert_allclose(mlm, mlm_full, atol=1e-5)
    # the pretraining heads on every position's full last layer, gathered: the same logits
    everywhere, nsp = BertForPreTraining(TINY).apply({"params": params}, ids, types, mask)
    np.testing.assert_allclose(mlm_full, pick(everywhere), atol=1e-5)
    no_dropout = BertForPreTraining(TINY.replace(hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0))
    train = no_dropout.apply({"params": params}, ids, types, mask, positions,
                             deterministic=False, rngs={"dropout": jax.random.key(2)})
    np.testing.assert_allclose(train[0], pick(everywhere), atol=1e-5)
    np.testing.assert_allclose(train[1], nsp, atol=1e-5)  # the pooler still reads [CLS]
    for module, x in ((BertForSequenceClassification, (ids, types, mask)),
                      (BertForMultipleChoice, tuple(np.stack([a, a[::-1]], 1)
                                                    for a in (ids, types, mask)))):
        p = module(TINY).init(jax.random.key(1), *x)
        key = {"dropout": jax.random.key(2)}
        with_dropout = module(TINY.replace(hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
        np.testing.assert_allclose(module(TINY).apply(p, *x),  # [CLS] only in the last layer
                                   with_dropout.apply(p, *x, deterministic=False, rngs=key),
                                   atol=1e-5)


def test_untied_decoder_has_its_own_weights():
    config = TINY.replace(tie_word_embeddings=False)
    params = BertForMaskedLM(config).init(jax.random.key(0), *batch())["params"]
    assert params["predictions"]["decoder"]["kernel"].shape == (32, 101)


def test_bert_params_of_any_model_apply_to_bert_model():
    ids, types, mask = batch()
    for cls in (BertForPreTraining, BertForMaskedLM, BertForSequenceClassification):
        params = cls(TINY).init(jax.random.key(0), ids, types, mask)["params"]
        seq, pooled = BertModel(TINY).apply({"params": params["bert"]}, ids, types, mask)
        assert seq.shape == (3, 9, 32)


def test_classifier_labels_and_bfloat16_compute():
    config = TINY.replace(id2label=("a", "b", "c"))
    ids, types, mask = batch()
    params = BertForSequenceClassification(config).init(jax.random.key(0), ids, types, mask)
    f32 = BertForSequenceClassification(config).apply(params, ids, types, mask)
    bf16 = BertForSequenceClassification(config, jnp.bfloat16).apply(params, ids, types, mask)
    assert f32.shape == (3, 3) and f32.dtype == bf16.dtype == jnp.float32
    assert np.abs(np.asarray(f32) - np.asarray(bf16)).max() < 2e-2
    seq, _ = BertModel(config, jnp.bfloat16).apply({"params": params["params"]["bert"]}, ids)
    assert np.isfinite(np.asarray(seq, np.float32)).all()


def test_xla_options_compile_and_keep_results():
    """The per-function XLA options are valid option names for this jaxlib (a renamed option
    fails to compile) and change speed or memory only, not results beyond rounding."""
    from bert_jax.runtime import xla_options
    ids, types, mask = batch()
    model = BertModel(TINY)
    params = model.init(jax.random.key(0), ids, types, mask)
    fwd = lambda p: model.apply(p, ids, types, mask)[0]  # noqa: E731
    plain = jax.jit(fwd)(params)
    for options in (xla_options.forward(), xla_options.train_step(remat=True),
                    xla_options.forward("float32"), xla_options.forward("bfloat16")):
        np.testing.assert_allclose(jax.jit(fwd, compiler_options=options)(params), plain,
                                   atol=1e-5, rtol=1e-5)


def test_bfloat16_embeddings_are_float32_lookups_and_sums():
    """No matmul in the embeddings, so bfloat16 compute must not round them at all."""
    ids, types, _ = batch()
    params = Embeddings(TINY).init(jax.random.key(0), ids, types, True)
    f32 = Embeddings(TINY).apply(params, ids, types, True)
    bf16 = Embeddings(TINY, jnp.bfloat16).apply(params, ids, types, True)
    assert bf16.dtype == jnp.float32
    np.testing.assert_array_equal(bf16, f32)


def test_bfloat16_mlm_head_rounds_only_at_the_matmuls():
    """In bfloat16 the transform's dense output is rounded (a matmul output), but its GELU and
    LayerNorm run in float32 on it, and the decoder multiplies their rounded result."""
    import flax.linen as nn
    config = TINY.replace(tie_word_embeddings=True)
    hidden = jax.random.normal(jax.random.key(1), (3, 4, 32))
    table = 0.05 * jax.random.normal(jax.random.key(2), (101, 32))
    params = MlmHead(config).init(jax.random.key(0), hidden, table)
    params["params"]["bias"] = 0.1 * jax.random.normal(jax.random.key(3), (101,))
    logits, state = MlmHead(config, jnp.bfloat16).apply(params, hidden, table,
                                                        capture_intermediates=True)
    dense_out = state["intermediates"]["dense"]["__call__"][0]  # (B, P, H)
    transformed = state["intermediates"]["layer_norm"]["__call__"][0]  # (B, P, H)
    assert dense_out.dtype == jnp.bfloat16 and transformed.dtype == logits.dtype == jnp.float32
    gelu = jax.nn.gelu(dense_out.astype(jnp.float32), approximate=False)
    ref = nn.LayerNorm(epsilon=config.layer_norm_eps).apply(
        {"params": params["params"]["layer_norm"]}, gelu)
    np.testing.assert_allclose(transformed, ref, rtol=1e-5, atol=1e-5)
    r = lambda a: a.astype(jnp.bfloat16).astype(jnp.float32)  # noqa: E731
    ref_logits = jnp.einsum("bph,vh->bpv", r(transformed), r(table)) + params["params"]["bias"]
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-5)
