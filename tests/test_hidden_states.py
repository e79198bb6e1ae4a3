"""Every layer's hidden states and attention probabilities: equal to transformers' (padding
present), and asking for them leaves the default outputs bit for bit as they were."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import make_hf_model

from bert_jax.model_files import parity
from bert_jax.model_files.huggingface import load_hf
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel, BertOutput

TINY = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=16)


def padded_batch(config=TINY, batch_size=3, seq_len=9, seed=0):
    """parity's batch: shrinking rows (so padded keys), both segments."""
    b = parity.parity_batch(config, batch_size, seq_len, seed=seed)
    return parity.inputs_np(b)


@pytest.mark.parametrize("shape", [(32, 2, 2, 37, "gelu"), (64, 4, 3, 96, "gelu_new")],
                         ids=lambda s: f"H{s[0]}A{s[1]}L{s[2]}")
def test_hidden_states_and_attentions_match_transformers(tmp_path, shape):
    import torch
    import transformers
    hidden, heads, layers, inter, act = shape
    make_hf_model(str(tmp_path), "BertModel", seed=hidden, hidden_size=hidden,
                  num_attention_heads=heads, num_hidden_layers=layers, intermediate_size=inter,
                  hidden_act=act)
    config, params = load_hf(str(tmp_path))
    batch = padded_batch(config, 4, 17, seed=layers)
    assert (batch["attention_mask"] == 0).any()
    hf = transformers.BertModel.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    with torch.no_grad():
        ref = hf(**{k: torch.from_numpy(np.asarray(v, np.int64)) for k, v in batch.items()},
                 output_hidden_states=True, output_attentions=True)
    out = jax.jit(lambda p, b: BertModel(config).apply(
        {"params": p}, **b, output_hidden_states=True, output_attentions=True))(
        params["bert"], batch)
    assert isinstance(out, BertOutput)
    assert len(out.hidden_states) == len(ref.hidden_states) == layers + 1
    assert len(out.attentions) == len(ref.attentions) == layers
    for ours, theirs in zip(out.hidden_states, ref.hidden_states):
        assert ours.shape == (4, 17, hidden) and ours.dtype == jnp.float32
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-5)
    for ours, theirs in zip(out.attentions, ref.attentions):
        assert ours.shape == (4, heads, 17, 17) and ours.dtype == jnp.float32
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-5)
        # padded keys get exactly no attention; every row is a distribution
        padded = np.broadcast_to(batch["attention_mask"][:, None, None, :] == 0, ours.shape)
        assert padded.any() and (np.asarray(ours)[padded] == 0).all()
        np.testing.assert_allclose(np.asarray(ours).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out.sequence_output, ref.last_hidden_state.numpy(), atol=1e-5)
    np.testing.assert_allclose(out.pooled_output, ref.pooler_output.numpy(), atol=1e-5)


@pytest.fixture(scope="module")
def tiny_params():
    return BertModel(TINY).init(jax.random.key(0), *padded_batch().values())["params"]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_default_outputs_are_unchanged_bit_for_bit(tiny_params, dtype, jit):
    batch = padded_batch()
    model = BertModel(TINY, dtype)

    def run(**flags):
        fn = lambda p, b: model.apply({"params": p}, **b, **flags)  # noqa: E731
        return (jax.jit(fn) if jit else fn)(tiny_params, batch)
    seq, pooled = default = run()
    assert isinstance(default, tuple) and not isinstance(default, BertOutput)
    for flags in ({"output_hidden_states": True}, {"output_attentions": True},
                  {"output_hidden_states": True, "output_attentions": True}):
        out = run(**flags)
        np.testing.assert_array_equal(out.sequence_output, seq)
        np.testing.assert_array_equal(out.pooled_output, pooled)
        assert (out.hidden_states is None) != flags.get("output_hidden_states", False)
        assert (out.attentions is None) != flags.get("output_attentions", False)
        if out.hidden_states is not None:
            np.testing.assert_array_equal(out.hidden_states[-1], seq)
    # bfloat16 too: float32 shapes and finite values, probabilities that sum to one
    assert len(out.hidden_states) == 4 and len(out.attentions) == 3
    for h in out.hidden_states:
        assert h.shape == (3, 9, 32) and h.dtype == jnp.float32 and np.isfinite(h).all()
    for a in out.attentions:
        assert a.shape == (3, 4, 9, 9) and a.dtype == jnp.float32 and np.isfinite(a).all()
        np.testing.assert_allclose(np.asarray(a).sum(-1), 1.0, atol=1e-5)


def test_embeddings_output_is_the_first_hidden_state(tiny_params):
    from bert_jax.models.encoder import Embeddings
    batch = padded_batch()
    out = BertModel(TINY).apply({"params": tiny_params}, **batch, output_hidden_states=True)
    emb = Embeddings(TINY).apply({"params": tiny_params["embeddings"]}, batch["input_ids"],
                                 batch["token_type_ids"], True)
    np.testing.assert_array_equal(out.hidden_states[0], emb)
    # each layer changes the residual stream: no hidden state repeats its predecessor
    for a, b in zip(out.hidden_states, out.hidden_states[1:]):
        assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1e-2


def test_with_dropout_and_remat_the_outputs_are_unchanged(tiny_params):
    """Training mode (dropout on attention probabilities, remat) with the flags on gives the
    same sequence output bit for bit for the same rng (returned probabilities: before dropout)."""
    config = TINY.replace(attention_probs_dropout_prob=0.5, hidden_dropout_prob=0.1)
    batch = padded_batch()
    rngs = {"dropout": jax.random.key(3)}

    def run(remat, **flags):
        fn = lambda p: BertModel(config, remat=remat).apply(  # noqa: E731
            {"params": p}, **batch, deterministic=False, rngs=rngs, **flags)
        return jax.jit(fn)(tiny_params)
    seq, _ = run(False)
    for remat in (False, True):
        out = run(remat, output_hidden_states=True, output_attentions=True)
        np.testing.assert_array_equal(out.sequence_output, seq)
        np.testing.assert_allclose(np.asarray(out.attentions[0]).sum(-1), 1.0, atol=1e-5)
    # a gradient flows through the hidden states (feature-based training on any layer)
    grad = jax.jit(jax.grad(lambda p: BertModel(config, remat=True).apply(
        {"params": p}, **batch, deterministic=False, rngs=rngs,
        output_hidden_states=True).hidden_states[1].sum()))(tiny_params)
    assert np.abs(grad["encoder"]["layer_0"]["attention"]["query"]["kernel"]).max() > 0
    assert not np.abs(grad["encoder"]["layer_1"]["attention"]["query"]["kernel"]).any()
