"""Pretraining recipe options, each tested for what it changes: dropout 0, the masking rate
(held out at 15% whatever it is), the sequence-length phases, the time budget (its rate, its
stop, checkpoint and export, its resume) and the rate scale the budget applies."""

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import bench_module, train_here

from bert_jax.data import masking, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertConfig, BertForPreTraining
from bert_jax.training import (optim, pretrain, pretrain_config, pretrain_parts, steps,
                               time_budget)
from bert_jax.training.pretrain_config import PretrainConfig


@pytest.fixture(scope="module")
def tok(pretrain_setup):
    base, _ = pretrain_setup
    return tokenizer.load(str(base / "vocab"))


def test_dropout_zero_makes_the_train_forward_the_deterministic_one():
    cfg = PretrainConfig(model="tiny", dropout=0.0)
    config = pretrain_parts.model_config(cfg, 300)
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0
    model = BertForPreTraining(config)
    ids = np.random.default_rng(0).integers(5, 300, (2, 24)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    params = model.init(jax.random.key(0), ids)["params"]
    train_out = model.apply({"params": params}, ids, None, mask, deterministic=False,
                            rngs={"dropout": jax.random.key(1)})
    eval_out = model.apply({"params": params}, ids, None, mask, deterministic=True)
    for a, b in zip(train_out, eval_out):  # equal to rounding (eval may use another kernel)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    with_dropout = BertForPreTraining(pretrain_parts.model_config(PretrainConfig(model="tiny"),
                                                                  300))
    noisy = with_dropout.apply({"params": params}, ids, None, mask, deterministic=False,
                               rngs={"dropout": jax.random.key(1)})
    assert not np.allclose(np.asarray(noisy[0]), np.asarray(eval_out[0]))


def test_masking_rate_trains_at_its_rate_and_holds_out_at_15_percent(tok):
    cfg = pretrain_config.validate(PretrainConfig(masked_lm_prob=0.4, max_seq_length=128))
    train_spec = pretrain_parts.masking_spec(cfg, tok)
    held_spec = pretrain_parts.heldout_masking_spec(cfg, tok)
    assert (train_spec.masked_lm_prob, train_spec.max_predictions_per_seq) == (0.4, 52)
    assert (held_spec.masked_lm_prob, held_spec.max_predictions_per_seq) == (0.15, 20)
    rng = np.random.default_rng(0)
    ids = rng.integers(10, tok.get_vocab_size(), (64, 128)).astype(np.int32)
    attention = (np.arange(128)[None] < rng.integers(40, 129, (64, 1))).astype(np.int32)
    batch = {"input_ids": ids, "attention_mask": attention,
             "token_type_ids": np.zeros_like(ids)}
    real = attention.sum()
    for spec, share in ((train_spec, 0.4), (held_spec, 0.15)):
        out = jax.jit(masking.mask_batch, static_argnums=2)(jax.random.key(0), batch, spec)
        assert abs(float(out["masked_lm_weights"].sum()) / real - share) < 0.005


def test_an_explicit_prediction_cap_below_the_rate_is_named():
    capped = PretrainConfig(masked_lm_prob=0.3, max_predictions_per_seq=20)
    assert pretrain_config.prediction_cap(capped) == (
        "config.max_predictions_per_seq: 20 caps the masked tokens below masked_lm_prob 0.3 of "
        "128 tokens; 0 (or 39) masks them all")
    assert pretrain_config.prediction_cap(capped.replace(max_predictions_per_seq=0)) == ""
    assert pretrain_config.prediction_cap(PretrainConfig(max_predictions_per_seq=20)) == ""


@pytest.mark.parametrize("field, value, needle", [
    ("phase1_seq_length", 128, "phase1_seq_length"), ("phase1_seq_length", 4, "from 8"),
    ("time_budget_minutes", -1.0, "time_budget_minutes"), ("masked_lm_prob", 0.0, "(0, 1)")])
def test_bad_recipe_values_are_refused_naming_the_field(field, value, needle):
    cfg = PretrainConfig(phase1_share=0.5).replace(**{field: value})
    with pytest.raises(BertJaxError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        pretrain_config.validate(cfg)


def test_phases_by_steps_and_by_the_clock():
    cfg = PretrainConfig(max_seq_length=128, phase1_seq_length=64, phase1_share=0.9, steps=100)
    phase = pretrain_parts.phase_of(cfg)
    assert [phase(s) for s in (0, 89, 90, 99)] == [64, 64, 128, 128]
    assert pretrain_parts.phase_of(cfg.replace(phase1_seq_length=0))(0) == 128

    class Clock:
        value = 0.0

        def share(self):
            return self.value

    clock = Clock()
    by_time = pretrain_parts.phase_of(cfg, clock)
    assert by_time(0) == 64
    clock.value = 0.95
    assert by_time(1) == 128


def test_the_phases_train_short_then_long_rows(pretrain_setup, tmp_path, monkeypatch):
    from bert_jax.data.pretraining_batches import PretrainingBatches
    base, overrides = pretrain_setup
    cfg = pretrain_config.load_config(
        "configs/pretrain_tiny.py",
        [o[len("--config."):] for o in overrides]
        + ["phase1_seq_length=16", "phase1_share=0.5", "steps=6", "checkpoint_every=100"])
    shapes, original = [], PretrainingBatches.train_batch

    def spy(self, step, *args):
        batch = original(self, step, *args)
        shapes.append((step, batch["input_ids"].shape[1]))
        return batch

    monkeypatch.setattr(PretrainingBatches, "train_batch", spy)
    final = pretrain.pretrain(cfg, str(tmp_path))
    assert shapes == [(0, 16), (1, 16), (2, 16), (3, 32), (4, 32), (5, 32)]
    assert math.isfinite(final.metrics["mlm_accuracy"]) and final.steps == 6


def test_rate_scale_is_the_learning_rate_times_the_scale():
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    grads = {"w": jnp.full((2, 3), 0.3), "b": jnp.full(3, -0.2)}

    def one_update(peak, scale):
        cfg = PretrainConfig(learning_rate=peak, warmup_steps=0, time_budget_minutes=1.0)
        schedule = pretrain_parts.learning_rate_schedule(cfg)
        state = steps.TrainState.create(apply_fn=None, params=params,
                                        tx=optim.make_optimizer(cfg, schedule))
        metrics = {"mlm_loss": (jnp.float32(1.0), 1.0)}
        new, m = steps.apply_update(state, grads, metrics, schedule,
                                    None if scale is None else jnp.float32(scale))
        return new.params, float(m["learning_rate"][0])

    scaled, lr = one_update(1e-2, 0.25)
    plain, plain_lr = one_update(2.5e-3, None)
    assert lr == pytest.approx(2.5e-3) and plain_lr == pytest.approx(2.5e-3)
    for k in params:
        np.testing.assert_allclose(scaled[k], plain[k], rtol=1e-6)


def test_budget_schedule_warms_up_by_steps_and_decays_with_the_clock():
    schedule = optim.warmup_then_constant(1e-3, 10)
    assert float(schedule(0)) == 0.0 and float(schedule(5)) == pytest.approx(5e-4)
    assert float(schedule(10)) == float(schedule(10_000)) == pytest.approx(1e-3)
    assert optim.budget_scale(0.0, 60.0) == 1.0
    assert optim.budget_scale(45.0, 60.0) == pytest.approx(0.25)
    assert optim.budget_scale(90.0, 60.0) == 0.0


def test_warmup_stable_decay_holds_the_peak_then_decays_over_the_last_share():
    linear = optim.learning_rate_schedule(1e-3, 10, 110)
    wsd = pretrain_parts.learning_rate_schedule(PretrainConfig(
        learning_rate=1e-3, warmup_steps=10, steps=110, decay_share=0.2))
    assert [float(wsd(s)) for s in (0, 5)] == [float(linear(s)) for s in (0, 5)]
    assert float(wsd(10)) == float(wsd(88)) == pytest.approx(1e-3)  # stable to step 88
    assert float(wsd(99)) == pytest.approx(0.5e-3) and float(wsd(110)) == 0.0
    assert float(linear(60)) == pytest.approx(0.5e-3)  # decay_share 1: today's linear decay
    assert optim.budget_scale(30.0, 60.0, decay_share=0.25) == 1.0
    assert optim.budget_scale(52.5, 60.0, decay_share=0.25) == pytest.approx(0.5)
    assert optim.budget_scale(60.0, 60.0, decay_share=0.25) == 0.0
    clock = time_budget.Clock(1.0, "unused", is_main=False, decay_share=0.5)
    clock.value = 45.0
    assert clock.rate_scale() == pytest.approx(0.5)
    with pytest.raises(BertJaxError, match="config.decay_share"):
        pretrain_config.validate(PretrainConfig(decay_share=0.0))


def test_initializer_range_sets_the_models_init_scale():
    cfg = PretrainConfig(model="tiny", initializer_range=0.05)
    config = pretrain_parts.model_config(cfg, 300)
    assert config.initializer_range == 0.05
    assert pretrain_parts.model_config(PretrainConfig(model="tiny"), 300).initializer_range == 0.02
    ids = np.ones((1, 8), np.int32)
    params = BertForPreTraining(config).init(jax.random.key(0), ids)["params"]
    kernel = np.asarray(params["bert"]["encoder"]["layer_0"]["attention"]["query"]["kernel"])
    # a normal truncated at two σ has standard deviation 0.88 σ
    assert kernel.std() == pytest.approx(0.88 * 0.05, rel=0.05)
    with pytest.raises(BertJaxError, match="config.initializer_range"):
        pretrain_config.validate(PretrainConfig(initializer_range=0.0))


def test_a_clock_resumes_the_time_its_checkpoint_had_spent(tmp_path):
    clock = time_budget.Clock(2.0, str(tmp_path), is_main=True)
    clock.value = 30.0
    clock.record(40)
    clock.value = 61.5
    clock.record(80)
    again = time_budget.Clock(2.0, str(tmp_path), is_main=True)
    again.resume(40)
    assert again.tick() >= 30.0 and again.share() == pytest.approx(0.25, abs=0.01)
    assert json.load(open(tmp_path / time_budget.FILE))["elapsed_seconds"]["80"] == 61.5


class _StepClock:
    """`time` for time_budget whose clock moves `seconds` a call, whatever the machine's load:
    a wall-clock budget in a test would leave one step on a loaded machine and many on a fast
    one (the first step's compile alone took 31 s under load)."""

    def __init__(self, seconds: float):
        self.now, self.seconds = 0.0, seconds

    def monotonic(self) -> float:
        self.now += self.seconds
        return self.now


def test_a_time_budget_stops_the_run_checkpointed_and_exported(pretrain_setup, tmp_path,
                                                               caplog, monkeypatch):
    base, overrides = pretrain_setup
    monkeypatch.setattr(time_budget, "time", _StepClock(0.5))  # about 30 steps
    budget = 0.25  # minutes: 15 s of the clock
    code = train_here(tmp_path, [*overrides, f"--config.time_budget_minutes={budget}",
                                 "--config.steps=1000000", "--config.warmup_steps=5",
                                 "--config.learning_rate=1e-3",
                                 "--config.checkpoint_every=1000000"])
    assert code == 0
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    train_rows = [r for r in rows if r["split"] == "train"]
    last = train_rows[-1]["step"]
    assert 5 < last < 1_000_000
    assert any(m.startswith("time budget of ") and " minutes spent at step " in m
               for m in caplog.messages), caplog.messages
    from bert_jax.model_files.paths import latest_checkpoint_step
    assert latest_checkpoint_step(str(tmp_path)) == last
    spent = json.load(open(tmp_path / time_budget.FILE))["elapsed_seconds"][str(last)]
    assert budget * 60 <= spent < budget * 60 + 2
    assert 20 < last < 40
    assert os.path.isfile(tmp_path / "export" / "model.safetensors")
    rates = [r["learning_rate"] for r in train_rows if r["step"] > 5]
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # decays with the clock
    assert rates[-1] < 0.2e-3  # near 0 when the budget ends
    assert any(r["split"] == "eval" and r["step"] == last for r in rows)


def test_sinusoidal_position_init_starts_positions_by_distance_and_keeps_the_rest():
    from bert_jax.training import initial_params
    config = BertConfig.preset("tiny", vocab_size=300)
    model = BertForPreTraining(config)
    params = model.init(jax.random.key(0), jnp.zeros((1, 8), jnp.int32))["params"]
    started = initial_params.with_position_init(params, config, "sinusoidal")
    table = np.asarray(started["bert"]["embeddings"]["position_embeddings"]["embedding"])
    assert table.shape == (config.max_position_embeddings, config.hidden_size)
    rms = np.sqrt((table.astype(np.float64) ** 2).mean())  # sin² + cos² = 1 per pair
    assert rms == pytest.approx(config.initializer_range, rel=1e-4)
    gram = table @ table.T  # depends on the distance only: a shift of both keeps it
    np.testing.assert_allclose(gram[10, 13], gram[100, 103], rtol=1e-4)
    assert gram[10, 11] > gram[10, 30] > 0
    flat = lambda t: jax.tree_util.tree_leaves_with_path(t)  # noqa: E731
    changed = [jax.tree_util.keystr(k) for (k, a), (_, b) in zip(flat(params), flat(started))
               if not np.array_equal(a, b)]
    assert changed == ["['bert']['embeddings']['position_embeddings']['embedding']"]
    assert initial_params.with_position_init(params, config, "normal") is params


def test_position_scale_and_mimetic_attention_start_where_they_say_and_keep_the_rest():
    from bert_jax.training import initial_params
    config = BertConfig.preset("tiny", vocab_size=300)
    params = BertForPreTraining(config).init(jax.random.key(0),
                                             jnp.zeros((1, 8), jnp.int32))["params"]
    sinusoids = initial_params.with_position_init(params, config, "sinusoidal")
    cfg = PretrainConfig(position_init="sinusoidal", position_scale=4.0, mimetic_qk=0.12)
    started = initial_params.starting_params(params, config, cfg)
    position = lambda p: np.asarray(p["bert"]["embeddings"]["position_embeddings"]["embedding"])  # noqa: E731,E501
    np.testing.assert_allclose(position(started), 4.0 * position(sinusoids), rtol=1e-6)
    for name, layer in started["bert"]["encoder"].items():
        query, key = (np.asarray(layer["attention"][k]["kernel"]) for k in ("query", "key"))
        np.testing.assert_array_equal(query, key)  # W_q W_kᵀ starts positive semi-definite
        assert query.std() == pytest.approx(0.12, rel=0.05)
        before = np.asarray(params["bert"]["encoder"][name]["attention"]["query"]["kernel"])
        np.testing.assert_allclose(query / before, 0.12 / (0.8796 * 0.02), rtol=1e-5)
    flat = lambda t: jax.tree_util.tree_leaves_with_path(t)  # noqa: E731
    changed = {jax.tree_util.keystr(k) for (k, a), (_, b) in zip(flat(params), flat(started))
               if not np.array_equal(a, b)}
    assert changed == {"['bert']['embeddings']['position_embeddings']['embedding']"} | {
        f"['bert']['encoder']['layer_{i}']['attention']['{k}']['kernel']"
        for i in range(2) for k in ("query", "key")}
    assert initial_params.starting_params(params, config, PretrainConfig()) is params
    # what it is for: the attention starts on each token's neighbours, not spread evenly
    tta = bench_module("time_to_accuracy")
    ids = np.random.default_rng(0).integers(5, 300, (2, 64)).astype(np.int32)
    batch = dict(input_ids=ids, token_type_ids=np.zeros_like(ids), attention_mask=np.ones_like(ids))
    spread = np.asarray(tta.neighbour_attention(config, sinusoids, batch))
    local = np.asarray(tta.neighbour_attention(config, started, batch))
    assert np.all(spread < 3 / 64) and np.all(local > 0.15)
    # and the entropy diagnostic reads spread attention as 1, the local start far below it
    assert np.all(np.asarray(tta.attention_entropy(config, sinusoids, batch)) > 0.99)
    assert np.all(np.asarray(tta.attention_entropy(config, started, batch)) < 0.5)
    with pytest.raises(BertJaxError, match="config.mimetic_qk"):
        pretrain_config.validate(PretrainConfig(mimetic_qk=-0.1))
    with pytest.raises(BertJaxError, match="config.position_scale"):
        pretrain_config.validate(PretrainConfig(position_scale=0.0))


def test_mimetic_heads_and_layers_start_only_those_local_and_leave_the_rest_spread():
    from bert_jax.training import initial_params
    config = BertConfig.preset("tiny", vocab_size=300)  # 2 heads of 64 columns
    params = BertForPreTraining(config).init(jax.random.key(0),
                                             jnp.zeros((1, 8), jnp.int32))["params"]
    params = initial_params.with_position_init(params, config, "sinusoidal", 4.0)
    started = initial_params.with_mimetic_qk(params, config, 0.08, heads=1)
    everyone = initial_params.with_mimetic_qk(params, config, 0.08, heads=0)
    for name, layer in started["bert"]["encoder"].items():
        q, k = (np.asarray(layer["attention"][n]["kernel"]) for n in ("query", "key"))
        q0, k0 = (np.asarray(params["bert"]["encoder"][name]["attention"][n]["kernel"])
                  for n in ("query", "key"))
        all_q = np.asarray(everyone["bert"]["encoder"][name]["attention"]["query"]["kernel"])
        np.testing.assert_array_equal(q[:, :64], k[:, :64])  # head 0: W_k starts as W_q
        np.testing.assert_array_equal(q[:, :64], all_q[:, :64])  # as with every head mimetic
        np.testing.assert_array_equal(q[:, 64:], q0[:, 64:])  # head 1: the original init
        np.testing.assert_array_equal(k[:, 64:], k0[:, 64:])
    tta = bench_module("time_to_accuracy")
    ids = np.random.default_rng(0).integers(5, 300, (2, 64)).astype(np.int32)
    mask = np.ones_like(ids)
    batch = dict(input_ids=ids, token_type_ids=np.zeros_like(ids), attention_mask=mask)
    for probs in tta.attention_maps(config, started, batch):  # per layer (B, N, L, L)
        local, spread = np.asarray(tta.head_neighbour_mass(probs, mask))
        assert local > 0.15 and spread < 3 / 64  # head 0 reads its neighbours, head 1 all
        assert np.asarray(tta.head_entropy(probs, mask))[1] > 0.99
    with pytest.raises(BertJaxError, match=r"config.mimetic_heads: expected 0 \(all\) to 2"):
        initial_params.with_mimetic_qk(params, config, 0.08, heads=3)
    with pytest.raises(BertJaxError, match="config.mimetic_heads"):
        pretrain_config.validate(PretrainConfig(mimetic_heads=-1))
    # mimetic_layers: only the first layers start so; the rest keep the original init whole
    first = initial_params.with_mimetic_qk(params, config, 0.08, layers=1)
    attention = lambda p, i, n: np.asarray(  # noqa: E731
        p["bert"]["encoder"][f"layer_{i}"]["attention"][n]["kernel"])
    for n in ("query", "key"):
        np.testing.assert_array_equal(attention(first, 0, n), attention(everyone, 0, n))
        np.testing.assert_array_equal(attention(first, 1, n), attention(params, 1, n))
    local, spread = (np.asarray(tta.head_neighbour_mass(p, mask)).min()
                     for p in tta.attention_maps(config, first, batch))
    assert local > 0.15 and spread < 3 / 64
    with pytest.raises(BertJaxError, match=r"config.mimetic_layers: expected 0 \(all\) to 2"):
        initial_params.with_mimetic_qk(params, config, 0.08, layers=3)
    with pytest.raises(BertJaxError, match="config.mimetic_layers"):
        pretrain_config.validate(PretrainConfig(mimetic_layers=-1))
