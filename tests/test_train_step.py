"""Optimiser and train step in-process: decay mask, schedule, accumulation = one big batch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bert_jax.training import losses, optim
from bert_jax.training import steps as train_step
from bert_jax.models.config import BertConfig
from bert_jax.models.task_models import BertForPreTraining
from bert_jax.data.masking import MaskingSpec
from bert_jax.errors import BertJaxError
from bert_jax.training.pretrain_config import PretrainConfig

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)
SPEC = MaskingSpec(vocab_size=50, mask_token_id=4, never_mask_ids=(0, 2, 3),
                   max_predictions_per_seq=3)


def make_batch(B=8, L=12, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 50, (B, L)).astype(np.int32)
    ids[:, 0], ids[:, 6], ids[:, -1] = 2, 3, 3
    mask = np.ones((B, L), np.int32)
    mask[::3, 9:] = 0
    ids[mask == 0] = 0
    types = np.zeros((B, L), np.int32)
    types[:, 7:] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
            "next_sentence_labels": rng.integers(0, 2, B).astype(np.int32)}


def test_schedule_is_linear_warmup_then_linear_decay():
    s = optim.learning_rate_schedule(1e-3, 10, 110)
    np.testing.assert_allclose([s(0), s(5), s(10), s(60), s(110)], [0, 5e-4, 1e-3, 5e-4, 0],
                               atol=1e-9)


def test_weight_decay_only_on_matrices():
    params = BertForPreTraining(CONFIG).init(jax.random.key(0), make_batch()["input_ids"])
    mask = optim.decay_mask(params["params"])
    flat = jax.tree_util.tree_flatten_with_path(mask)[0]
    decayed = {jax.tree_util.keystr(p) for p, v in flat if v}
    assert any("word_embeddings" in p for p in decayed) and any("query']['kernel" in p
                                                                for p in decayed)
    assert not any("bias" in p or "layer_norm" in p for p in decayed)
    # and the optimiser really leaves an un-decayed param alone when its gradient is zero
    cfg = PretrainConfig(learning_rate=0.1, warmup_steps=0, steps=10, weight_decay=0.5)
    tx = optim.make_optimizer(cfg)
    p = {"w": jnp.ones((2, 2)), "b": jnp.ones((2,))}
    updates, _ = tx.update(jax.tree.map(jnp.zeros_like, p), tx.init(p), p)
    assert np.all(np.asarray(updates["b"]) == 0) and np.all(np.asarray(updates["w"]) < 0)


def _state(cfg):
    model = BertForPreTraining(CONFIG)
    params = model.init(jax.random.key(1), make_batch()["input_ids"])["params"]
    return train_step.TrainState.create(apply_fn=model.apply, params=params,
                                        tx=optim.make_optimizer(cfg))


def test_gradient_accumulation_equals_one_big_batch():
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=1, steps=10)
    schedule = optim.learning_rate_schedule(1e-3, 1, 10)
    batch, key = make_batch(), jax.random.key(3)
    no_dropout = BertForPreTraining(CONFIG.replace(hidden_dropout_prob=0.0,
                                                   attention_probs_dropout_prob=0.0))
    results = []
    for k in (1, 2, 4):
        state = _state(cfg).replace(apply_fn=no_dropout.apply)
        step = jax.jit(train_step.make_pretrain_step(SPEC, schedule, grad_accum_steps=k))
        for _ in range(2):
            state, metrics = step(state, batch, key)
        results.append((state.params, metrics))
    for params, metrics in results[1:]:
        for a, b in zip(jax.tree.leaves(results[0][0]), jax.tree.leaves(params)):
            np.testing.assert_allclose(a, b, atol=2e-6)
        for name in ("mlm_loss", "nsp_loss", "mlm_accuracy"):
            np.testing.assert_allclose(metrics[name], results[0][1][name], rtol=1e-5)
    assert float(results[0][1]["nonfinite"][0]) == 0


def test_nonfinite_update_is_skipped_and_flagged():
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=1, steps=10)
    state = _state(cfg)
    schedule = optim.learning_rate_schedule(1e-3, 1, 10)
    grads = jax.tree.map(jnp.zeros_like, state.params)
    grads["predictions"]["bias"] = grads["predictions"]["bias"].at[0].set(jnp.nan)
    new, metrics = train_step.apply_update(state, grads, {"x": (jnp.float32(1), 1.0)}, schedule)
    assert float(metrics["nonfinite"][0]) == 1 and int(new.step) == 1
    for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(state.params)):
        np.testing.assert_array_equal(a, b)
    # the optimiser state is kept too, all but the schedule's count, which follows the step
    changed = [(int(a), int(b)) for a, b in zip(jax.tree.leaves(new.opt_state),
                                                jax.tree.leaves(state.opt_state))
               if not np.array_equal(a, b)]
    assert changed == [(1, 0)] and int(optim.schedule_count(new.opt_state, -1)) == 1


def test_step_is_a_pure_function_of_state_batch_key():
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=0, steps=10)  # lr > 0 at step 0
    step = jax.jit(train_step.make_pretrain_step(SPEC, optim.learning_rate_schedule(1e-3, 0, 10)))
    state = _state(cfg)  # one state (one static tx), so the step compiles once
    a = step(state, make_batch(), jax.random.key(0))[0]
    b = step(state, make_batch(), jax.random.key(0))[0]
    c = step(state, make_batch(), jax.random.key(1))[0]
    assert jax.tree.all(jax.tree.map(np.array_equal, a.params, b.params))
    assert not jax.tree.all(jax.tree.map(np.array_equal, a.params, c.params))
    assert isinstance(optax.tree.norm(a.params), jax.Array)


def test_lamb_option_takes_a_layerwise_trust_ratio_step():
    cfg = PretrainConfig(optimizer="lamb", learning_rate=0.1, warmup_steps=0, steps=10,
                         weight_decay=0.0)
    tx = optim.make_optimizer(cfg)
    p = {"w": jnp.full((2, 2), 2.0), "b": jnp.full((2,), 0.5)}
    g = {"w": jnp.full((2, 2), 1e-3), "b": jnp.full((2,), 1e-3)}
    updates, _ = tx.update(g, tx.init(p), p)
    # LAMB scales each matrix's Adam step (≈ −1 per entry here) by ‖p‖ / ‖step‖, times the lr;
    # 1-D params (biases, LayerNorm) take the plain Adam step, as BERT's LAMB recipes do
    np.testing.assert_allclose(updates["w"], -0.1 * 2.0, rtol=1e-3)
    np.testing.assert_allclose(updates["b"], -0.1, rtol=2e-3)


def test_lamb_moves_a_small_bias_by_the_learning_rate():
    """optax.lamb's trust ratio ‖b‖/‖step‖ = 0.01 would move a 0.01 bias by 1e-5, not 1e-3."""
    cfg = PretrainConfig(optimizer="lamb", learning_rate=1e-3, warmup_steps=0, steps=10,
                         weight_decay=0.01)
    tx = optim.make_optimizer(cfg)
    p = {"w": jnp.full((3, 2), 2.0), "b": jnp.full((4,), 0.01)}
    g = {"w": jnp.full((3, 2), -1e-3), "b": jnp.full((4,), -1e-3)}
    updates, _ = tx.update(g, tx.init(p), p)
    # Adam's first step is g / (|g| + eps) = 1 / 1.001 per entry, times the lr
    np.testing.assert_allclose(updates["b"], 1e-3 / 1.001, rtol=1e-5)
    # the matrix's step (Adam + decay) is rescaled to ‖w‖ per entry: −(−1 + 0.01·2) > 0
    np.testing.assert_allclose(updates["w"], 1e-3 * 2.0, rtol=1e-5)


def test_make_optimizer_uses_the_schedule_it_is_given():
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=0, steps=10, weight_decay=0.0)
    for optimizer in ("adamw", "lamb"):
        tx = optim.make_optimizer(cfg.replace(optimizer=optimizer), schedule=lambda count: 0.25)
        p = {"b": jnp.full((2,), 3.0)}
        updates, _ = tx.update({"b": jnp.full((2,), 0.5)}, tx.init(p), p)
        np.testing.assert_allclose(updates["b"], -0.25, rtol=1e-4)  # Adam's first step ≈ 1


def test_a_skipped_update_keeps_the_schedule_in_step():
    """After a skip, the next update applies schedule(step) and logs that very rate."""
    cfg = PretrainConfig(learning_rate=1e-2, warmup_steps=4, steps=10, weight_decay=0.0,
                         max_grad_norm=100.0)
    schedule = optim.learning_rate_schedule(1e-2, 4, 10)  # 0, 2.5e-3, 5e-3, … during warm-up
    state = train_step.TrainState.create(apply_fn=None, params={"w": jnp.ones((2, 2))},
                                         tx=optim.make_optimizer(cfg, schedule))
    ok = {"loss": (jnp.float32(1.0), 1.0)}
    state, m0 = train_step.apply_update(state, {"w": jnp.full((2, 2), jnp.nan)}, ok, schedule)
    assert float(m0["nonfinite"][0]) == 1 and float(m0["learning_rate"][0]) == schedule(0)
    assert int(state.step) == int(optim.schedule_count(state.opt_state, -1)) == 1
    new, m1 = train_step.apply_update(state, {"w": jnp.full((2, 2), 0.5)}, ok, schedule)
    # Adam's bias correction counts the one update its moments have had, so its step is
    # g / (|g| + eps) in full (advancing its count on the skip would shrink it to ≈ 0.74)
    applied = float(schedule(1)) * 0.5 / (0.5 + 1e-6)
    np.testing.assert_allclose(state.params["w"] - new.params["w"], applied, rtol=1e-5)
    np.testing.assert_allclose(m1["learning_rate"][0], schedule(1), rtol=1e-7)
    assert int(new.step) == int(optim.schedule_count(new.opt_state, -1)) == 2


def test_remat_gives_the_same_gradients():
    batch = make_batch()
    positions = np.tile(np.array([[1, 4, 8]], np.int32), (batch["input_ids"].shape[0], 1))
    plain, remat = BertForPreTraining(CONFIG), BertForPreTraining(CONFIG, remat=True)
    params = plain.init(jax.random.key(1), batch["input_ids"])["params"]

    def grads(model):
        def loss(p):  # dropout on: remat must redraw the very same masks in the backward pass
            mlm, nsp = model.apply({"params": p}, batch["input_ids"], batch["token_type_ids"],
                                   batch["attention_mask"], positions, deterministic=False,
                                   rngs={"dropout": jax.random.key(2)})
            return jnp.sum(mlm ** 2) / mlm.size + jnp.sum(nsp ** 2)
        return jax.grad(loss), jax.jit(jax.grad(loss))(params)

    (f_plain, g_plain), (f_remat, g_remat) = grads(plain), grads(remat)
    # really rematerialised: more checkpoints than the ones the model always has (GELU, softmax)
    n_plain, n_remat = (str(jax.make_jaxpr(f)(params)).count("remat2[") for f in (f_plain,
                                                                                     f_remat))
    assert n_remat > n_plain
    for a, b in zip(jax.tree.leaves(g_plain), jax.tree.leaves(g_remat)):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-6)


def _loss_and_grads(monkeypatch, objective, batch):
    """One jitted pretrain step with the step's own loss_fn spied on: (loss, metrics, grads)
    of its first micro-batch (the whole batch, k = 1), handed out of the compiled step by a
    debug callback, and the step's returned metrics."""
    seen = {}
    real = train_step.accumulate_gradients

    def spy(loss_fn, params, micro, key, k):
        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, micro, jax.random.fold_in(key, 0))
        jax.debug.callback(lambda *values: seen.update(zip(("loss", "metrics", "grads"),
                                                           values)), loss, metrics, grads)
        return real(loss_fn, params, micro, key, k)

    monkeypatch.setattr(train_step, "accumulate_gradients", spy)
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=0, steps=10)
    step = jax.jit(train_step.make_pretrain_step(
        SPEC, optim.learning_rate_schedule(1e-3, 0, 10), objective=objective))
    _, metrics = step(_state(cfg), jax.tree.map(jnp.asarray, batch), jax.random.key(5))
    jax.effects_barrier()  # the callback has run
    assert set(seen) == {"loss", "metrics", "grads"}
    return seen, metrics


def test_mlm_objective_is_the_mlm_loss_alone_and_leaves_the_nsp_head_alone(monkeypatch):
    batch = make_batch()
    del batch["next_sentence_labels"]  # a packed "mlm" batch has none
    seen, metrics = _loss_and_grads(monkeypatch, "mlm", batch)
    mlm_sum, mlm_total = (float(x) for x in seen["metrics"]["mlm_loss"])
    assert mlm_total >= 8  # every row has masked positions
    np.testing.assert_allclose(float(seen["loss"]), mlm_sum / mlm_total, rtol=1e-6)
    nsp_head = seen["grads"]["seq_relationship"]
    assert all(np.all(np.asarray(g) == 0) for g in jax.tree.leaves(nsp_head))
    assert np.any(np.asarray(seen["grads"]["predictions"]["bias"]) != 0)
    assert not any(name.startswith("nsp") for name in list(seen["metrics"]) + list(metrics))
    assert {"mlm_loss", "mlm_accuracy", "grad_norm"} <= set(metrics)


def test_mlm_nsp_objective_adds_the_nsp_loss(monkeypatch):
    seen, metrics = _loss_and_grads(monkeypatch, "mlm+nsp", make_batch())
    m = {k: float(v[0]) / float(v[1]) for k, v in seen["metrics"].items()}
    np.testing.assert_allclose(float(seen["loss"]), m["mlm_loss"] + m["nsp_loss"], rtol=1e-6)
    assert np.any(np.asarray(seen["grads"]["seq_relationship"]["kernel"]) != 0)
    assert {"nsp_loss", "nsp_accuracy"} <= set(metrics)


def test_mlm_objective_under_jit_keeps_the_nsp_head_params():
    """Without weight decay a zero gradient moves nothing: Adam's step is 0 / (0 + eps)."""
    cfg = PretrainConfig(learning_rate=1e-2, warmup_steps=0, steps=10, weight_decay=0.0)
    state = _state(cfg)
    batch = make_batch()
    del batch["next_sentence_labels"]
    step = jax.jit(train_step.make_pretrain_step(
        SPEC, optim.learning_rate_schedule(1e-2, 0, 10), grad_accum_steps=2, objective="mlm"))
    new, metrics = step(state, batch, jax.random.key(0))
    for a, b in zip(jax.tree.leaves(state.params["seq_relationship"]),
                    jax.tree.leaves(new.params["seq_relationship"])):
        np.testing.assert_array_equal(a, b)
    bias = state.params["predictions"]["bias"], new.params["predictions"]["bias"]
    assert not np.array_equal(*bias)  # the MLM head did learn
    assert float(metrics["nonfinite"][0]) == 0 and "nsp_loss" not in metrics


def test_mlm_eval_step_has_no_nsp_metrics():
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=0, steps=10)
    state, batch = _state(cfg), jax.tree.map(jnp.asarray, make_batch())
    labels = batch.pop("next_sentence_labels")
    mlm = train_step.make_pretrain_eval_step(SPEC, objective="mlm")(state, batch,
                                                                     jax.random.key(0))
    both = train_step.make_pretrain_eval_step(SPEC)(
        state, dict(batch, next_sentence_labels=labels), jax.random.key(0))
    assert set(mlm) == {"mlm_loss", "mlm_accuracy"}
    assert set(both) == {"mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"}
    np.testing.assert_allclose(mlm["mlm_loss"], both["mlm_loss"], rtol=1e-6)  # same masks


def test_an_unknown_objective_is_refused():
    schedule = optim.learning_rate_schedule(1e-3, 0, 10)
    with pytest.raises(BertJaxError,
                       match="objective: expected mlm\\+nsp, mlm\\+sop, mlm, got 'nsp'"):
        train_step.make_pretrain_step(SPEC, schedule, objective="nsp")
    with pytest.raises(BertJaxError, match="objective: expected mlm\\+nsp, mlm\\+sop, mlm"):
        train_step.make_pretrain_eval_step(SPEC, objective="MLM")


def test_total_loss_adds_nsp_only_when_there_is_one():
    assert losses.total_loss({"mlm_loss": 2.5, "nsp_loss": 0.5})["loss"] == 3.0
    values = {"mlm_loss": 2.5, "mlm_accuracy": 0.1}
    assert losses.total_loss(values) is values and values["loss"] == 2.5


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_layer_rate_decay_scales_each_layers_update_by_decay_to_its_depth(optimizer):
    """config.layer_lr_decay: on a 3-layer classifier's own parameter tree, every update (the
    weight decay in it) is the undecayed optimiser's times 0.5^depth: the head, pooler and
    top layer ×1, layer 1 ×0.5, layer 0 ×0.25, the embeddings ×0.125."""
    from bert_jax.models import BertForSequenceClassification
    config = CONFIG.replace(num_hidden_layers=3)  # two labels (id2label) by default
    ids = jnp.zeros((1, 8), jnp.int32)
    shapes = jax.eval_shape(BertForSequenceClassification(config).init, jax.random.key(0), ids)
    params = jax.tree.map(lambda s: jnp.full(s.shape, 0.7, s.dtype), shapes["params"])
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.3), params)
    cfg = PretrainConfig(learning_rate=1e-3, warmup_steps=0, steps=10, weight_decay=0.01,
                         optimizer=optimizer)
    plain = optim.make_optimizer(cfg)
    decayed = optim.make_optimizer(cfg, layer_decay=0.5, num_layers=3)
    expected, _ = plain.update(grads, plain.init(params), params)
    found, _ = decayed.update(grads, decayed.init(params), params)
    factor = {"classifier": 1, "pooler": 1, "layer_2": 1, "layer_1": 0.5, "layer_0": 0.25,
              "embeddings": 0.125}
    seen = set()
    for (path, want), got in zip(jax.tree_util.tree_leaves_with_path(expected),
                                 jax.tree.leaves(found)):
        group = next(k.key for k in path if k.key in factor)
        seen.add(group)
        np.testing.assert_allclose(got, factor[group] * want, rtol=1e-6, err_msg=str(path))
    assert seen == set(factor)


def test_layer_lr_decay_is_refused_outside_zero_to_one():
    from bert_jax.training.finetune_config import FinetuneConfig, validate
    base = FinetuneConfig(init_from="m", train_file="t.csv", validation_file="v.csv")
    assert validate(base.replace(layer_lr_decay=0.8)).layer_lr_decay == 0.8
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(BertJaxError, match=r"^config.layer_lr_decay: expected a value in "
                                               r"\(0, 1\], got "):
            validate(base.replace(layer_lr_decay=bad))
