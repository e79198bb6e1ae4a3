"""Data parallelism: one mesh over every device of every process; params replicated, batch split.

One code path for 1 device, N devices and N processes: the jitted step sees global arrays and
XLA inserts the gradient all-reduce. Each process feeds only its own rows of the global batch.
"""

from __future__ import annotations

import logging
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_jax.errors import BertJaxError
from bert_jax.runtime import multihost

log = logging.getLogger(__name__)
DATA = "data"


def initialize_distributed(coordinator_address=None, num_processes=None, process_id=None,
                           initialization_timeout: int = 300, heartbeat_timeout: int = None,
                           prog: str = "bert-jax", say=None) -> None:
    """Join a multi-process run: the three explicit arguments, or JAX's detection on Slurm / TPU
    (runtime/multihost.py keeps it from hanging: lost peers, a missing one, mismatches).

    A plain single-process run (no arguments, no cluster environment) does nothing.
    """
    given = [v is not None for v in (coordinator_address, num_processes, process_id)]
    if any(given) and not all(given):
        raise BertJaxError("coordinator_address, num_processes and process_id go together")
    cluster = int(os.environ.get("SLURM_NTASKS", "1")) > 1 or "TPU_WORKER_HOSTNAMES" in os.environ
    if not any(given) and not cluster:
        return
    if not any(given):
        from jax._src import clusters
        coordinator_address, num_processes, process_id, _ = (
            clusters.ClusterEnv.auto_detect_unset_distributed_params(
                None, None, None, None, None, initialization_timeout))
    multihost.initialize(coordinator_address, num_processes, process_id,
                         initialization_timeout,
                         heartbeat_timeout or multihost.DEFAULT_HEARTBEAT_TIMEOUT, prog, say)
    log.info("process %d of %d, %d local / %d global devices", jax.process_index(),
             jax.process_count(), jax.local_device_count(), jax.device_count())


def make_mesh() -> Mesh:
    return jax.make_mesh((jax.device_count(),), (DATA,),
                         axis_types=(jax.sharding.AxisType.Auto,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def data_sharded(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over the "data" axis."""
    return NamedSharding(mesh, PartitionSpec(DATA))


def check_batch_size(batch_size: int, micro_batches: int = 1, name: str = "batch_size") -> None:
    """Fail early and readably when the global batch does not divide the devices."""
    devices = jax.device_count()
    if batch_size % (devices * micro_batches):
        raise BertJaxError(
            f"config.{name}: {batch_size} does not divide evenly over {devices} device(s)"
            + (f" × {micro_batches} micro-batches" if micro_batches > 1 else "")
            + f"; use a multiple of {devices * micro_batches}")


def global_batch(host_batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """This process's rows of the global batch → global arrays sharded on "data"."""
    sharding = data_sharded(mesh)
    local = len(mesh.local_devices)
    out = {}
    for name, rows in host_batch.items():
        if rows.shape[0] % local:
            raise BertJaxError(f"batch: {name} has {rows.shape[0]} rows on this process, not a "
                               f"multiple of its {local} devices")
        out[name] = jax.make_array_from_process_local_data(sharding, rows)
    return out


def replicated_scalar(value: float, mesh: Mesh) -> jax.Array:
    """A float32 scalar every process holds alike (a time-budget run's rate scale) → a
    replicated global array, explicitly transferred."""
    return jax.make_array_from_process_local_data(replicated(mesh), np.float32(value))


def replicated_key(seed: int, mesh: Mesh) -> jax.Array:
    """jax.random.key(seed) committed to every device of the mesh once, so no step re-sends it
    (made under jit: `device_put` cannot target devices of other processes)."""
    return jax.jit(lambda: jax.random.key(seed), out_shardings=replicated(mesh))()


def fetch(tree):
    """Device (possibly multi-host replicated) arrays → host numpy, from this process's copy.

    One explicit `jax.device_get` for the whole tree: its copies start together, and the loop
    runs clean under `jax.transfer_guard("disallow")`.
    """
    local = jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x, tree)
    return jax.tree.map(np.asarray, jax.device_get(local))
