"""bench/profile_step.py on a tiny BERT: every op of our step is found in the trace, put in a
part of the model, and the ops' times add up to about a step's wall time."""

import time

from conftest import bench_module


def test_profile_of_our_step_covers_every_part_and_adds_up():
    bp, ps = bench_module("bench_pretrain"), bench_module("profile_step")
    from bert_jax.models.config import BertConfig
    config = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ours = bp.Ours(config, bp.make_batch(config, 4, seq=32), masked=5)
    ours()
    t = time.perf_counter()
    for _ in range(3):
        ours()
    step_ms = (time.perf_counter() - t) / 3 * 1e3

    ops, classes, regions = ps.profile_ours(ours, steps=3)
    names = ps.hlo_op_names(ours.step.as_text())
    assert ops and all(ms >= 0 for ms in ops.values())
    assert set(ops) <= set(ps.hlo_opcodes(ours.step.as_text()))  # only the step's own ops
    assert classes["matmul"] > 0
    for part in ("feed-forward", "attention projections", "attention scores, softmax, context",
                 "MLM head", "LayerNorm"):
        assert f"forward: {part}" in regions and f"backward: {part}" in regions, part
    assert "optimizer and update" in regions and "forward: loss" in regions
    # an op is unattributed exactly when XLA made it without a JAX op behind it (layout copies,
    # its wrapped reduce-windows, library fusions), and every matmul has its JAX op path. No
    # share of time is asserted: it depends on the CPU, the compiler and a cold or warm cache
    # (10.7% on a cold-cache AMD EPYC, under 10% warm). No op is counted twice: the parts add
    # up to the ops' total, which is a step's wall time less dispatch (generous: a loaded machine)
    opcodes = ps.hlo_opcodes(ours.step.as_text())
    unattributed = {name: ms for name, ms in ops.items() if not names.get(name)}
    assert abs(sum(unattributed.values()) - regions.get("unattributed", 0.0)) < 1e-9
    assert all(ps.region_ours(names[name]) != "unattributed" for name in ops if names.get(name))
    assert not [name for name in unattributed
                if opcodes[name] in ("dot", "fusion:dot", "custom-call")]
    assert len(unattributed) < len(ops) and classes["matmul"] == sum(
        ms for name, ms in ops.items() if ps._class_ours(name, opcodes[name]) == "matmul")
    assert abs(sum(regions.values()) - sum(ops.values())) < 1e-6
    assert 0 < sum(ops.values()) < 3 * step_ms


def test_region_of_an_op_path():
    ps = bench_module("profile_step")
    fwd = "jit(pretrain_step)/jvp(BertForPreTraining)/bert/encoder/layer_0/"
    bwd = "jit(pretrain_step)/transpose(jvp(BertForPreTraining))/bert/encoder/layer_0/"
    assert ps.region_ours(fwd + "attention/key/tf,fo->to/dot_general") == \
        "forward: attention projections"
    assert ps.region_ours(bwd + "attention/einsum/dot_general") == \
        "backward: attention scores, softmax, context"
    assert ps.region_ours(fwd + "attention/layer_norm/mul") == "forward: LayerNorm"
    assert ps.region_ours(bwd + "feed_forward/intermediate/tf,fo->to/dot_general") == \
        "backward: feed-forward"
    assert ps.region_ours("jit(pretrain_step)/jvp()/exp") == "forward: loss"
    assert ps.region_ours("jit(pretrain_step)/cond/branch_1_fun/add") == "optimizer and update"
    assert ps.region_ours("") == "unattributed"
