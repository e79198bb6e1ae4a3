"""Each kernel in bert_jax.models.ops against the plain library op it replaces: forward and
gradients (a wrong custom VJP shows here, not only as a drift between two custom versions)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models.ops import matmul
from bert_jax.models.ops.attention import attention, forward_attention
from bert_jax.models.ops.dense import Dense
from bert_jax.models.ops.dropout import Dropout, dropout, dropout_mask, random_bits
from bert_jax.models.ops.layer_norm import LayerNorm

BF16_ULP = 2.0 ** -7  # bfloat16's relative spacing: one rounding differs by at most this


def normal(seed, shape, scale=1.0, shift=0.0):
    return shift + scale * jax.random.normal(jax.random.key(seed), shape)


def rounded(a):
    """a rounded to bfloat16, held in float32."""
    return a.astype(jnp.bfloat16).astype(jnp.float32)


def vjp_of(fn, *args, seed=99):
    """fn(*args) and its gradients w.r.t. every argument for one random output cotangent g.

    Jitted, as in a training step: XLA:CPU divides by a constant as a multiplication by its
    reciprocal inside a compiled computation, but op by op it divides exactly.
    """
    g = jax.tree.map(lambda o: normal(seed, o.shape).astype(o.dtype), jax.eval_shape(fn, *args))

    @jax.jit
    def run(args, g):
        out, pullback = jax.vjp(fn, *args)
        return out, pullback(g)

    return *run(args, g), g


def assert_trees_close(actual, desired, **tol):
    assert jax.tree.structure(actual) == jax.tree.structure(desired)
    for a, d in zip(jax.tree.leaves(actual), jax.tree.leaves(desired)):
        assert a.shape == d.shape and a.dtype == d.dtype, (a.shape, a.dtype, d.shape, d.dtype)
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(d, np.float32), **tol)


# --- LayerNorm ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_layer_norm_equals_flax_forward_and_gradients(dtype):
    eps = 1e-12
    x = normal(0, (3, 5, 48), scale=2.0, shift=3.0).astype(dtype)  # non-zero mean and scale
    params = {"params": {"scale": normal(1, (48,), 0.5, 1.0), "bias": normal(2, (48,), 0.3)}}
    ours = lambda p, x: LayerNorm(eps).apply(p, x)  # noqa: E731
    # flax's own bfloat16-input gradient rounds the direct and the mean/variance paths to
    # bfloat16 apart before summing them, and they cancel; ours is the float32 gradient rounded
    # once, which is flax's on the input cast to float32 first (its forward is the same either way)
    ref = lambda p, x: nn.LayerNorm(epsilon=eps, dtype=jnp.float32).apply(  # noqa: E731
        p, x.astype(jnp.float32)).astype(jnp.float32)
    out, grads, _ = vjp_of(ours, params, x)
    ref_out, ref_grads, _ = vjp_of(ref, params, x)
    assert out.dtype == ref_out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        out, nn.LayerNorm(epsilon=eps, dtype=jnp.float32).apply(params, x), rtol=1e-6, atol=1e-6)
    assert_trees_close(grads[0], ref_grads[0], rtol=1e-5, atol=1e-5)  # scale and bias
    # the input gradient comes back in the input's dtype: one bfloat16 rounding apart at most
    tol = 1e-5 if dtype == jnp.float32 else BF16_ULP / 2
    assert_trees_close(grads[1], ref_grads[1], rtol=tol, atol=1e-5)


# --- Dense -------------------------------------------------------------------------------------

def dense_params(seed, features_in, features_out):
    """nn.Dense's own init (so the names and shapes are nn.Dense's), with a non-zero bias."""
    params = nn.Dense(features_out).init(jax.random.key(seed), jnp.zeros((1, features_in)))
    params["params"]["bias"] = normal(seed + 1, (features_out,), 0.5)
    return params


def test_dense_has_flax_dense_parameters():
    x = jnp.zeros((2, 7, 16))
    ours = Dense(24).init(jax.random.key(0), x)
    ref = nn.Dense(24).init(jax.random.key(0), x)
    assert jax.tree.map(jnp.shape, ours) == jax.tree.map(jnp.shape, ref)
    assert_trees_close(ours, ref, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(12, 16), (3, 4, 16)])
def test_dense_equals_flax_dense_in_float32(shape):
    params = dense_params(0, 16, 24)
    x = normal(3, shape)
    out, grads, _ = vjp_of(lambda p, x: Dense(24).apply(p, x), params, x)
    ref_out, ref_grads, _ = vjp_of(lambda p, x: nn.Dense(24).apply(p, x), params, x)
    assert out.shape == shape[:-1] + (24,) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref_out, rtol=1e-6, atol=1e-6)
    assert_trees_close(grads, ref_grads, rtol=1e-5, atol=1e-5)  # kernel, bias and input


@pytest.mark.parametrize("shape", [(12, 16), (3, 4, 16)])
def test_dense_in_bfloat16_is_the_float32_product_of_rounded_operands(shape):
    """Operands rounded, product and bias in float32, the sum rounded once; the backward pass is
    float32 products of the rounded output gradient and rounded operands."""
    params = dense_params(0, 16, 24)
    kernel, bias = params["params"]["kernel"], params["params"]["bias"]
    x = normal(3, shape)
    out, (grads, dx), g = vjp_of(lambda p, x: Dense(24, jnp.bfloat16).apply(p, x), params, x)
    assert out.dtype == jnp.bfloat16 and g.dtype == jnp.bfloat16
    g = g.astype(jnp.float32)
    ref = jnp.einsum("...f,fo->...o", rounded(x), rounded(kernel)) + bias
    assert_trees_close(out.astype(jnp.float32), ref, rtol=BF16_ULP / 2, atol=1e-6)
    ref_dkernel = jnp.einsum("...f,...o->fo", rounded(x), g)
    np.testing.assert_allclose(grads["params"]["kernel"], ref_dkernel, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads["params"]["bias"], g.reshape(-1, 24).sum(0), rtol=1e-5,
                               atol=1e-5)
    assert dx.dtype == jnp.float32 and np.array_equal(dx, rounded(dx))  # rounded once
    ref_dx = jnp.einsum("...o,fo->...f", g, rounded(kernel))
    np.testing.assert_allclose(dx, ref_dx, rtol=BF16_ULP / 2, atol=1e-6)


# --- attention ---------------------------------------------------------------------------------

def reference_attention(q, k, v, mask, keep=None, rate=0.0):
    """Plain softmax attention: scores, where(mask), float32 softmax, dropout by `keep`."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])  # (B, N, L, L)
    scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    p = jax.nn.softmax(scores.astype(jnp.float32), axis=-1)
    if keep is not None:
        p = jnp.where(keep, p / (1.0 - rate), 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)  # (B, L, N, D)


@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_attention_equals_plain_softmax_attention(rate):
    B, L, N, D = 3, 10, 2, 8
    q, k, v = (normal(i, (B, L, N, D)) for i in range(3))
    lengths = np.array([10, 6, 2])
    mask = jnp.asarray(np.arange(L)[None, :] < lengths[:, None])[:, None, None, :]  # (B,1,1,L)
    rng = jax.random.key(7)
    keep = jax.random.bernoulli(rng, 1.0 - rate, (B, N, L, L)) if rate else None
    ours = lambda q, k, v: attention(q, k, v, mask, dropout_rate=rate,  # noqa: E731
                                     dropout_rng=rng if rate else None)
    out, grads, _ = vjp_of(ours, q, k, v)
    ref_out, ref_grads, _ = vjp_of(lambda q, k, v: reference_attention(q, k, v, mask, keep, rate),
                                   q, k, v)
    np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-5)
    assert_trees_close(grads, ref_grads, rtol=1e-4, atol=1e-5)  # q, k and v
    # hidden keys get no gradient at all
    hidden = ~np.asarray(mask[:, 0, 0, :])
    assert np.all(np.asarray(grads[1])[hidden] == 0) and np.all(np.asarray(grads[2])[hidden] == 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_forward_attention_equals_jax_dot_product_attention(dtype):
    """Heads-first layout, float32 accumulation: jax.nn's result, to its rounding in bfloat16."""
    B, L, N, D = 3, 10, 2, 8
    q, k, v = (normal(i, (B, L, N, D)).astype(dtype) for i in range(3))
    mask = jnp.asarray(np.arange(L)[None, :] < np.array([10, 6, 2])[:, None])[:, None, None, :]
    ours = jax.jit(forward_attention, static_argnums=4)(q, k, v, mask, jnp.dtype(dtype))
    ref = jax.nn.dot_product_attention(q, k, v, mask=mask)
    assert ours.shape == ref.shape == (B, L, N, D) and ours.dtype == ref.dtype == dtype
    tol = 1e-6 if dtype == "float32" else BF16_ULP
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(ref, np.float32),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(ours.astype(jnp.float32), reference_attention(
        *(x.astype(jnp.float32) for x in (q, k, v)), mask), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_free_training_attention_has_jax_nn_gradients(dtype):
    """attention() at dropout 0 (the default pretraining recipe's training path) is the
    heads-first forward_attention under autodiff: jax.nn.dot_product_attention's output and
    q, k, v gradients, to float32 summation order (to a few bfloat16 roundings in bfloat16,
    where jax.nn's products are rounded to bfloat16 and ours accumulate in float32)."""
    B, L, N, D = 3, 10, 2, 8
    q, k, v = (normal(i, (B, L, N, D)).astype(dtype) for i in range(3))
    mask = jnp.asarray(np.arange(L)[None, :] < np.array([10, 6, 2])[:, None])[:, None, None, :]
    ours = lambda q, k, v: attention(q, k, v, mask, dtype=jnp.dtype(dtype))  # noqa: E731
    out, grads, _ = vjp_of(ours, q, k, v)
    ref_out, ref_grads, _ = vjp_of(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=mask),
                                   q, k, v)
    assert out.dtype == ref_out.dtype == dtype
    tol = 1e-5 if dtype == "float32" else 4 * BF16_ULP
    for ours_x, ref_x in zip((out, *grads), (ref_out, *ref_grads)):
        ours_x, ref_x = np.asarray(ours_x, np.float32), np.asarray(ref_x, np.float32)
        np.testing.assert_allclose(ours_x, ref_x, rtol=tol, atol=tol * np.abs(ref_x).max())


# --- mixed-precision einsum --------------------------------------------------------------------

@pytest.mark.parametrize("spec,shapes", [("tf,fo->to", ((24, 16), (16, 40))),
                                         ("th,vh->tv", ((24, 16), (50, 16)))])
def test_rounded_einsum_gradients_are_the_rounded_products(spec, shapes):
    """matmul.einsum in bfloat16: the forward and both gradients equal float32 products of the
    bfloat16-rounded operands and output gradient (to float32 summation order), as
    torch.autocast computes them."""
    x, w = (jax.random.normal(jax.random.key(i), s) for i, s in enumerate(shapes))
    g = jax.random.normal(jax.random.key(5), jnp.einsum(spec, x, w).shape)
    r = rounded
    out, vjp = jax.vjp(lambda x, w: matmul.einsum(spec, x, w, jnp.bfloat16), x, w)
    ref_out, ref_vjp = jax.vjp(lambda x, w: jnp.einsum(spec, x, w), r(x), r(w))
    assert out.dtype == jnp.float32
    # products of bfloat16 values are exact in float32: only the summation order differs
    np.testing.assert_allclose(out, ref_out, rtol=1e-6, atol=1e-6)
    dx, dw = vjp(g)
    ref_dx, ref_dw = ref_vjp(r(g))
    assert dx.dtype == dw.dtype == jnp.float32
    assert np.array_equal(dx, r(dx))  # dx comes out rounded to the operand's dtype, once
    np.testing.assert_allclose(dx, ref_dx, rtol=BF16_ULP / 2, atol=1e-6)
    np.testing.assert_allclose(dw, ref_dw, rtol=1e-5, atol=1e-5)
    # float32 is plain jnp.einsum, autodiff and all
    np.testing.assert_array_equal(matmul.einsum(spec, x, w, jnp.float32), jnp.einsum(spec, x, w))


# --- dropout -----------------------------------------------------------------------------------

@pytest.mark.parametrize("keep_prob", [0.9, 0.5, 0.1, 0.999, 0.0, 1.0, 1 - 1e-9])
def test_dropout_mask_equals_bernoulli_bit_for_bit(keep_prob):
    """The unrolled threefry + integer threshold draws exactly jax.random.bernoulli's mask, so
    dropout is nn.Dropout's, only cheaper."""
    for seed in range(3):
        key = jax.random.key(seed)
        for shape in [(3, 4, 9, 9), (5, 33), (1000,)]:
            np.testing.assert_array_equal(jax.jit(random_bits, static_argnums=1)(key, shape),
                                          jax.random.bits(key, shape, jnp.uint32))
            mask = jax.jit(dropout_mask, static_argnums=(1, 2))(key, keep_prob, shape)
            np.testing.assert_array_equal(mask, jax.random.bernoulli(key, keep_prob, shape))
    legacy = jax.random.PRNGKey(7)  # raw uint32 keys too
    np.testing.assert_array_equal(random_bits(legacy, (4, 6)),
                                  jax.random.bits(legacy, (4, 6), jnp.uint32))
    if 0 < keep_prob < 1:  # and the fraction kept is keep_prob
        kept = dropout_mask(jax.random.key(9), keep_prob, (400, 500)).mean()
        assert abs(float(kept) - keep_prob) < 4 * np.sqrt(keep_prob * (1 - keep_prob) / 2e5)


@pytest.mark.parametrize("rate", [0.1, 0.5])
@pytest.mark.parametrize("shape", [(4, 3, 33), (6, 16)])  # a last axis that is not whole bytes
def test_dropout_module_equals_flax_dropout_with_its_gradient(rate, shape):
    x = normal(0, shape)
    rngs = {"dropout": jax.random.key(3)}
    ours = lambda x: Dropout(rate).apply({}, x, False, rngs=rngs)  # noqa: E731
    ref = lambda x: nn.Dropout(rate).apply({}, x, False, rngs=rngs)  # noqa: E731
    out, (dx,), g = vjp_of(ours, x)
    ref_out, (ref_dx,), _ = vjp_of(ref, x)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(dx, ref_dx)
    keep = np.asarray(out) != 0
    np.testing.assert_allclose(dx, np.where(keep, g / (1 - rate), 0.0), rtol=3e-7, atol=0)
    np.testing.assert_array_equal(Dropout(rate).apply({}, x, True), x)


@pytest.mark.parametrize("keep_prob", [0.9, 0.25])
def test_dropout_keeps_its_share_and_its_gradient_is_mask_over_keep_prob(keep_prob):
    shape = (500, 400)
    rng = jax.random.key(11)
    x = normal(1, shape, shift=5.0)  # no zeros: a zero output means dropped
    out, (dx,), g = vjp_of(lambda x: dropout(rng, x, keep_prob), x)
    keep = jax.random.bernoulli(rng, keep_prob, shape)
    np.testing.assert_array_equal(np.asarray(out) != 0, keep)
    np.testing.assert_allclose(out, jnp.where(keep, x / keep_prob, 0.0), rtol=3e-7, atol=0)
    n = keep.size  # the share kept is keep_prob within 4 binomial standard deviations
    assert abs(float(keep.mean()) - keep_prob) < 4 * np.sqrt(keep_prob * (1 - keep_prob) / n)
    np.testing.assert_allclose(dx, jnp.where(keep, g / keep_prob, 0.0), rtol=3e-7, atol=0)
    np.testing.assert_array_equal(dropout(rng, x, 1.0), x)  # keep everything: the identity
