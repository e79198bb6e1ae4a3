"""The job skeleton (training/run.py): evaluation over every row, padding that weighs nothing,
one state initialiser, and the named RNG streams."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.models import BertConfig, BertForPreTraining, BertForSequenceClassification
from bert_jax.runtime import rng, sharding
from bert_jax.training import run, steps
from bert_jax.training.loop import StopRequest

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)


class _Nothing:
    def __getattr__(self, name):
        raise AssertionError(f"{name} is not used by evaluation")


@pytest.fixture
def ctx():
    with StopRequest() as stop:
        yield run.RunContext(workdir="unused", mesh=sharding.make_mesh(), writer=_Nothing(),
                             checkpointer=_Nothing(), stop=stop,
                             key=sharding.replicated_key(0, sharding.make_mesh()), is_main=True)


@pytest.mark.parametrize("rows,batch_size", [(5, 4), (3, 8), (8, 4)])
def test_eval_outputs_covers_every_row_once(ctx, rows, batch_size):
    arrays = {"x": np.arange(rows, dtype=np.float32) + 1}
    fn = run.jit_eval(ctx.mesh, lambda state, batch: (batch["x"], batch["example_weights"]))
    outputs, counts = run.eval_outputs(ctx, fn, None, arrays, batch_size)
    assert counts == [min(batch_size, rows - s) for s in range(0, rows, batch_size)]
    values = np.concatenate([x[:n] for (x, _), n in zip(outputs, counts)])
    np.testing.assert_array_equal(values, arrays["x"])  # in order, padding dropped
    weights = np.concatenate([w for _, w in outputs])
    assert weights.sum() == rows and set(weights) <= {0.0, 1.0}


def test_a_heldout_set_smaller_than_a_batch_is_scored_without_its_padding(ctx):
    """3 held-out rows, batch 8: the 5 padding rows (copies of the last) must not count."""
    model = BertForPreTraining(CONFIG)
    params = model.init(jax.random.key(0), jnp.zeros((1, 12), jnp.int32))["params"]
    state = steps.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1))
    r = np.random.default_rng(0)
    heldout = {"input_ids": r.integers(5, 50, (3, 12)).astype(np.int32),
               "token_type_ids": np.zeros((3, 12), np.int32),
               "attention_mask": np.ones((3, 12), np.int32),
               "masked_lm_positions": np.tile(np.arange(1, 4), (3, 1)).astype(np.int32),
               "masked_lm_ids": r.integers(5, 50, (3, 3)).astype(np.int32),
               "masked_lm_weights": np.ones((3, 3), np.float32),
               "next_sentence_labels": np.array([0, 1, 0], np.int32)}
    fn = run.jit_eval(ctx.mesh,
                      lambda s, b: steps.pretraining_metrics(s.apply_fn, s.params, b, True))
    (metrics,), counts = run.eval_outputs(ctx, fn, state, heldout, 8)
    assert counts == [3]
    assert metrics["nsp_loss"][1] == 3 and metrics["mlm_loss"][1] == 9
    alone = steps.pretraining_metrics(model.apply, params, heldout, True)  # no padding at all
    for name in ("mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"):
        np.testing.assert_allclose(metrics[name][0], alone[name][0], rtol=1e-5)


def test_init_state_draws_from_the_init_stream_and_keeps_pretrained_groups(ctx):
    model = BertForSequenceClassification(CONFIG)
    ids = jnp.zeros((1, 8), jnp.int32)
    fresh = model.init(rng.init_key(3), ids)["params"]
    state = run.init_state(ctx, model, optax.sgd(0.1), max_seq_length=8, seed=3)
    jax.tree.map(np.testing.assert_array_equal, sharding.fetch(state.params), fresh)
    encoder = jax.tree.map(lambda x: np.asarray(x) + 1.0, fresh["bert"])
    state = run.init_state(ctx, model, optax.sgd(0.1), max_seq_length=8, seed=3,
                           pretrained={"bert": encoder}, source="test")
    got = sharding.fetch(state.params)
    jax.tree.map(np.testing.assert_array_equal, got["bert"], encoder)  # pretrained encoder
    jax.tree.map(np.testing.assert_array_equal, got["classifier"], fresh["classifier"])
    # only the leaves a checkpoint lacks are drawn (the rest of the init is dead code to XLA),
    # and they are the full init's to the bit, after `start`: here a pooler and the head
    start = lambda p: jax.tree.map(lambda x: x * 2.0, p)  # noqa: E731
    no_pooler = {k: v for k, v in encoder.items() if k != "pooler"}
    state = run.init_state(ctx, model, optax.sgd(0.1), max_seq_length=8, seed=3,
                           pretrained={"bert": no_pooler}, source="test", start=start)
    got = sharding.fetch(state.params)
    jax.tree.map(np.testing.assert_array_equal, got["bert"], dict(
        no_pooler, pooler=jax.tree.map(lambda x: x * 2.0, fresh["bert"]["pooler"])))
    jax.tree.map(np.testing.assert_array_equal, got["classifier"],
                 jax.tree.map(lambda x: x * 2.0, fresh["classifier"]))


def test_named_streams_are_apart_from_every_step_key():
    key = rng.run_key(0)
    step_keys = {tuple(np.asarray(jax.random.key_data(rng.step_key(key, s)))) for s in range(50)}
    named = [rng.init_key(0)] + rng.eval_keys(key, 2)
    assert not {tuple(np.asarray(jax.random.key_data(k))) for k in named} & step_keys
    assert rng.INIT != rng.EVAL
