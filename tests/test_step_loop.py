"""The pretraining step loop in steady state (issue #6): the jitted train step compiles once,
and the steps copy between host and device only explicitly.

One in-process `trainer.pretrain` of a tiny model (6 steps, a log every 3) with `loop.run_steps`
wrapped: step 1 runs (and compiles) as usual, steps 2–6, two log steps among them, run under
`jax.transfer_guard("disallow")`. Explicit copies (`jax.device_put`,
`jax.make_array_from_process_local_data`, `jax.device_get`) pass the guard; implicit ones
(`float(array)`, numpy on a jax.Array, a Python scalar or numpy array fed to a jitted function)
raise. On CPU a jax.Array already lives in host memory, so the guard cannot see device → host
reads: those are caught here by recording every read of an array's value that does not come
from `jax.device_get`.

Also: each log's padding_share, from batches of known padding.
"""

import logging
import os
import traceback

import jax
import numpy as np
import optax
import pytest
from jax._src import array as jax_array
from jax._src import config as jax_config
from jax.sharding import NamedSharding

from bert_jax.data import tokenizer
from bert_jax.models.config import BertConfig
from bert_jax.runtime import sharding
from bert_jax.training import loop, steps
from bert_jax.training import pretrain as trainer
from bert_jax.training.pretrain_config import PretrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, WARMUP = 6, 1


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _record_implicit_reads(monkeypatch, reads):
    """Append a short stack to `reads` for every read of a jax.Array's host value outside
    jax.device_get: float / int / bool / str / .tolist() (all through `_value` in jax 0.10) and
    np.asarray / np.array / np.asanyarray (numpy takes a CPU array's buffer directly, past any
    Python hook; numpy reductions such as np.sum(array) remain invisible on CPU)."""
    def note():
        if not jax_config.guard_lib.thread_local_state().explicit_device_get:
            frames = [f"{os.path.relpath(f.filename, ROOT)}:{f.lineno} {f.line}"
                      for f in traceback.extract_stack()[:-2]
                      if f.filename.startswith(os.path.join(ROOT, "bert_jax"))]
            reads.append(" <- ".join(reversed(frames)))

    value = jax_array.ArrayImpl._value
    monkeypatch.setattr(jax_array.ArrayImpl, "_value",
                        property(lambda self: (note(), value.fget(self))[1]))
    for name in ("asarray", "array", "asanyarray"):
        def convert(a, *args, _original=getattr(np, name), **kwargs):
            if isinstance(a, jax.Array):
                note()
            return _original(a, *args, **kwargs)
        monkeypatch.setattr(np, name, convert)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Pretrain once; return what the steady-state steps did."""
    base = tmp_path_factory.mktemp("step_loop")
    corpus = base / "corpus"
    corpus.mkdir()
    for name in ("emma", "persuasion"):
        with open(os.path.join(ROOT, "data", "austen", f"{name}.txt"), encoding="utf-8") as f:
            (corpus / f"{name}.txt").write_text("".join(f.readlines()[:150]), encoding="utf-8")
    tok = tokenizer.train_tokenizer(str(corpus / "*.txt"), 200, str(base / "vocab"))
    BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=16, num_hidden_layers=1,
               num_attention_heads=2, intermediate_size=32,
               max_position_embeddings=32).to_json_file(str(base / "model.json"))
    cfg = PretrainConfig(model=str(base / "model.json"), vocab=str(base / "vocab"),
                         train_files=str(corpus / "*.txt"), max_seq_length=32,
                         max_predictions_per_seq=5, batch_size=8, steps=STEPS, warmup_steps=1,
                         log_every=3, eval_every=0, eval_fraction=0.0)

    out = {"implicit_reads": [], "error": None}
    real_run_steps = loop.run_steps
    records = _Records()

    def run_steps(ctx, step_fn, state, batch_for_step, *, until, **kw):
        state = real_run_steps(ctx, step_fn, state, batch_for_step, until=WARMUP, **kw)
        mesh, arguments = ctx.mesh, []

        def checked_step(*args):
            arguments.extend(jax.tree.leaves(args))
            return step_fn(*args)

        first = len(records.messages)
        with pytest.MonkeyPatch.context() as mp, jax.transfer_guard("disallow"):
            _record_implicit_reads(mp, out["implicit_reads"])
            try:
                state = real_run_steps(ctx, checked_step, state, batch_for_step, until=until,
                                       **kw)
            except Exception as e:  # a disallowed transfer; finish the run to report it
                out["error"] = e
        out["steady_compiles"] = [m for m in records.messages[first:] if "Compiling" in m]
        out["off_mesh"] = sorted({f"{type(a).__name__} {a.shape} on {a.sharding}"
                                  for a in arguments if not (isinstance(a.sharding, NamedSharding)
                                                             and a.sharding.mesh == mesh)})
        out["cache_size"] = step_fn._cache_size()
        return real_run_steps(ctx, step_fn, state, batch_for_step, until=until, **kw)

    logger = logging.getLogger("jax")
    logger.addHandler(records)
    try:
        with pytest.MonkeyPatch.context() as mp, jax.log_compiles(True):
            mp.chdir(base)  # the examples cache goes under base/.cache
            mp.setattr(loop, "run_steps", run_steps)
            trainer.pretrain(cfg, str(base / "work"))
    finally:
        logger.removeHandler(records)
    out["step_compiles"] = [m for m in records.messages if "Compiling jit(pretrain_step)" in m]
    return out


def test_the_train_step_compiles_once(run):
    assert len(run["step_compiles"]) == 1, run["step_compiles"]
    assert run["cache_size"] == 1
    assert run["steady_compiles"] == []  # nor anything else, log steps included


def test_steady_state_steps_make_no_implicit_transfer(run):
    assert run["error"] is None, run["error"]
    assert run["implicit_reads"] == [], "\n".join(sorted(set(run["implicit_reads"])))


def test_step_arguments_already_live_on_the_mesh(run):
    # one device hides it: an argument on a single device (an uncommitted jax.random.key) is
    # copied to every device of an N-device mesh at every step
    assert run["off_mesh"] == []


class _Writer:
    def __init__(self):
        self.records = []

    def write(self, step, split, values):
        self.records.append((step, split, dict(values)))


class _Checkpointer:
    directory = "nowhere"

    def save(self, step, state, force=False):
        pass

    def latest_step(self):
        return None


def test_each_log_holds_its_windows_padding_share():
    """Steps 0, 1, 2 pad 8, 16 and 0 of their 4 × 8 positions; logs every 2 steps and at 3."""
    padded = (8, 16, 0)

    def batch_for_step(step):
        mask = np.ones((4, 8), np.int32)
        mask.reshape(-1)[32 - padded[step]:] = 0  # padding at the ends of the last rows
        return {"attention_mask": mask}

    def step_fn(state, batch, key):
        real = batch["attention_mask"].sum().astype(np.float32)
        return state.replace(step=state.step + 1), {"real": (real, 1.0),
                                                    "nonfinite": (np.float32(0.0), 1.0)}

    mesh = sharding.make_mesh()
    ctx = type("Ctx", (), {"mesh": mesh, "key": sharding.replicated_key(0, mesh),
                           "writer": _Writer(), "checkpointer": _Checkpointer(),
                           "stop": type("Stop", (), {"at": lambda self, step: None})()})()
    state = steps.TrainState.create(apply_fn=None, params={}, tx=optax.identity())
    state = loop.run_steps(ctx, jax.jit(step_fn), state, batch_for_step, until=3, total=3,
                           log_every=2, desc="test", postfix=("real",))
    assert int(sharding.fetch(state.step)) == 3
    assert [(step, split) for step, split, _ in ctx.writer.records] == [(2, "train"),
                                                                      (3, "train")]
    first, last = (values for _, _, values in ctx.writer.records)
    assert first["padding_share"] == pytest.approx(24 / 64) and last["padding_share"] == 0.0
    assert (first["real"], last["real"]) == (20.0, 32.0)  # the step saw that very mask
    assert first["tokens_per_second"] > 0
