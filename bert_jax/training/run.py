"""The job skeleton shared by pretraining and fine-tuning.

A job checks its inputs (a refusal writes nothing), then opens a RunContext (mesh, checkpointer,
metric writer, stop flag, run key, is-main), builds its state with `init_state` (fresh,
merged with pretrained weights) and `restore_latest` (its own latest checkpoint wins), steps
with training/loop.run_steps, and scores held-out rows with `eval_outputs`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from bert_jax.model_files import model_dir
from bert_jax.data import batches
from bert_jax.runtime import multihost, rng, sharding, xla_options
from bert_jax.runtime.train_state_checkpoints import Checkpointer
from bert_jax.runtime.metric_writer import MetricWriter
from bert_jax.training import steps
from bert_jax.training.loop import StopRequest

log = logging.getLogger("bert_jax")


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What a training job did, for its caller (the CLI's last lines, a script), so that no one
    re-reads the workdir to find out."""

    workdir: str
    steps: int  # train steps taken in all (fewer than configured when a time budget ended it)
    metrics: dict  # pretraining: the final held-out metrics; fine-tuning: metrics.json's content
    model: str  # what load_pretrained reads: the pretraining workdir, the fine-tuned best model
    export: str  # the Hugging Face export (written by process 0)
    checkpoints: str  # the orbax checkpoint directory


@dataclasses.dataclass
class RunContext:
    """What every part of a running job shares."""

    workdir: str
    mesh: Mesh  # every device of every process, one "data" axis
    writer: MetricWriter  # metrics.jsonl + TensorBoard (a no-op off process 0)
    checkpointer: Checkpointer  # WORKDIR/checkpoints
    stop: StopRequest  # SIGTERM / SIGINT arrived: save and stop after this step
    key: jax.Array  # the run key, replicated on the mesh; runtime/rng names its streams
    is_main: bool  # process 0: the one that writes JSON, the model directories and exports

    def global_batch(self, host: dict) -> dict:
        """This process's rows → global arrays sharded over the mesh."""
        return sharding.global_batch(host, self.mesh)


@contextlib.contextmanager
def run_context(workdir: str, seed: int, keep_checkpoints: int, checkpoint_every: int,
                checkpoint_dir: str = "", on_start: Optional[Callable[[], None]] = None):
    """A RunContext for `workdir` (checkpoints in `checkpoint_dir`, default WORKDIR/checkpoints;
    with several processes, a directory they all share); its checkpointer finishes pending
    saves and its writer closes on the way out, whatever happened. `on_start()` is called when
    the checks are done and training begins: what fails after it is no bad input."""
    mesh = sharding.make_mesh()
    is_main = jax.process_index() == 0
    checkpointer = Checkpointer(workdir, keep_checkpoints, checkpoint_every, checkpoint_dir)
    multihost.check_shared_directory(checkpointer.directory)
    multihost.note_step(None, checkpointer.directory)
    writer = MetricWriter(workdir, enabled=is_main)
    if on_start is not None:
        on_start()
    try:
        with StopRequest() as stop:
            yield RunContext(workdir, mesh, writer, checkpointer, stop,
                             sharding.replicated_key(seed, mesh), is_main)
    finally:
        try:
            checkpointer.close()
        finally:
            writer.close()


def init_state(ctx: RunContext, model, tx, *, max_seq_length: int, seed: int,
               pretrained: Optional[dict] = None, source: str = "",
               input_shape: Optional[tuple] = None,
               start: Optional[Callable[[dict], dict]] = None) -> steps.TrainState:
    """The one state initialiser: parameters from rng.init_key(seed), made directly in their
    replicated sharding; every group `pretrained` (read from `source`) has replaces its fresh
    init (a pretrained encoder under a fresh head); then the optimiser state.

    The model is initialised on input_ids of `input_shape` (default (1, max_seq_length); multiple
    choice takes (1, C, L)). `start(params)` (pure) changes a fresh init where it begins
    (pretraining's position and attention init); pretrained groups replace its result."""
    replicated = sharding.replicated(ctx.mesh)
    ids = jnp.zeros(input_shape or (1, max_seq_length), jnp.int32)
    start = start or (lambda p: p)
    init = lambda key: start(model.init(key, ids)["params"])  # noqa: E731
    if pretrained is None:
        params = jax.jit(init, out_shardings=replicated)(rng.init_key(seed))
    else:
        params = jax.device_put(_merged_init(init, rng.init_key(seed), pretrained, source),
                                replicated)
    create = lambda p: steps.TrainState.create(apply_fn=model.apply, params=p, tx=tx)  # noqa
    return jax.jit(create, out_shardings=replicated)(params)


def _merged_init(init: Callable, key, pretrained: dict, source: str) -> dict:
    """init(key) with `pretrained`'s groups swapped in (model_dir.merge_params), drawing only
    the leaves the checkpoint lacks (a fresh head, say). Their values are init(key)'s: the
    discarded leaves are dead code to XLA, so it neither compiles nor runs their draws (a
    released encoder's full init costs seconds of compile, MiniLM's ~4)."""
    from flax import traverse_util
    merged = traverse_util.flatten_dict(
        model_dir.merge_params(pretrained, jax.eval_shape(init, key), source))
    drawn = [name for name, leaf in merged.items() if isinstance(leaf, jax.ShapeDtypeStruct)]
    if drawn:
        pick = lambda k: [traverse_util.flatten_dict(init(k))[n] for n in drawn]  # noqa: E731
        merged.update(zip(drawn, jax.device_get(jax.jit(pick)(key))))
    return traverse_util.unflatten_dict(merged)


def restore_latest(ctx: RunContext, state):
    """The run's latest complete checkpoint, shaped and sharded like `state`, if there is one."""
    latest = ctx.checkpointer.latest_step()
    if latest is None:
        return state
    log.info("resuming from %s/%d", ctx.checkpointer.directory, latest)
    return ctx.checkpointer.restore(latest, state)


def jit_train_step(mesh: Mesh, step_fn: Callable, remat: bool, dtype: str,
                   rate_scale: bool = False):
    """step_fn(state, batch, key[, rate_scale]) jitted: state, key (and the scalar rate_scale
    when it takes one) replicated, batch split over the mesh, the old state's buffers donated
    to the new one."""
    r, d = sharding.replicated(mesh), sharding.data_sharded(mesh)
    shardings = (r, d, r, r) if rate_scale else (r, d, r)
    return jax.jit(step_fn, in_shardings=shardings, out_shardings=(r, r), donate_argnums=(0,),
                   compiler_options=xla_options.train_step(remat, dtype))


def jit_eval(mesh: Mesh, fn: Callable, takes_key: bool = False):
    """fn(state, batch[, key]) jitted for evaluation: a forward pass, its result replicated."""
    r, d = sharding.replicated(mesh), sharding.data_sharded(mesh)
    return jax.jit(fn, in_shardings=(r, d, r) if takes_key else (r, d), out_shardings=r,
                   compiler_options=xla_options.forward())


def num_eval_batches(rows: int, batch_size: int, limit: int = 0) -> int:
    """Batches that cover `rows` (the last one partial), at most `limit` when it is set."""
    count = -(-rows // batch_size)
    return min(count, limit) if limit else count


def eval_outputs(ctx: RunContext, fn: Callable, state, arrays: dict, batch_size: int,
                 keys: Optional[list] = None, max_batches: int = 0) -> tuple[list, list]:
    """fn(state, batch[, keys[i]]) over every row of `arrays` (or its first `max_batches`
    batches) in batches of the global `batch_size`.

    The last batch is padded by repeating its final row, so shapes never change, and each batch
    carries `example_weights` (B,), 0.0 on padding, for metrics that sum over rows. Batches are
    dispatched back to back and fetched once. Returns (per-batch outputs as numpy, real rows
    per batch): drop the padding of a per-row output with `output[:rows]`.
    """
    pc, pi = jax.process_count(), jax.process_index()
    local = batch_size // pc
    outputs, rows = [], []
    for i, (batch, n) in enumerate(batches.eval_batches(arrays, batch_size)):
        if max_batches and i >= max_batches:
            break
        batch["example_weights"] = (np.arange(batch_size) < n).astype(np.float32)
        host = {k: v[pi * local:(pi + 1) * local] for k, v in batch.items()}
        args = (state, ctx.global_batch(host)) + ((keys[i],) if keys is not None else ())
        outputs.append(fn(*args))
        rows.append(n)
    return sharding.fetch(outputs), rows
