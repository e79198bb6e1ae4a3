"""Train-state checkpoints (WORKDIR/checkpoints: step, params, optimiser state; what a run
resumes from) with orbax's CheckpointManager: async, keep K, atomic. Model directories and
their files are model_files/'s.

Orbax writes each step into a temporary directory and renames it when complete, so a killed
save is never restored (and its leftovers are cleaned up on the next start). The resume rule:
this run's latest checkpoint > `init_from` > scratch.
"""

from __future__ import annotations

import os
import re

import jax
import orbax.checkpoint as ocp

from bert_jax.model_files.paths import checkpoint_dir
from bert_jax.errors import BertJaxError


def state_tree(state) -> dict:
    """The parts of a TrainState that are saved (functions and static config are not)."""
    return {"step": state.step, "params": state.params, "opt_state": state.opt_state}


class Checkpointer:
    """CheckpointManager over WORKDIR/checkpoints (or `directory`) for TrainState-like
    pytrees. With several processes, one checkpoint is written by all of them into one shared
    directory, orbax's multi-host layout: process 0 writes the metadata and the replicated
    arrays, every process joins each save's barriers."""

    def __init__(self, workdir: str, keep: int, every: int, directory: str = ""):
        self.failed = False
        self.directory = os.path.abspath(checkpoint_dir(workdir, directory))
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, save_interval_steps=every, create=True,
            cleanup_tmp_directories=True, enable_async_checkpointing=True)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self):
        return self.manager.latest_step()

    def save(self, step: int, state, force: bool = False) -> bool:
        """Save if `step` is due (or `force`); returns whether a save started.

        Raises BertJaxError when this or an earlier (async) save failed, e.g. a full disk.
        """
        try:
            return self.manager.save(step, args=ocp.args.StandardSave(state_tree(state)),
                                     force=force)
        except Exception as e:  # noqa: BLE001 - orbax/tensorstore raise ValueError, OSError, …
            raise self._failed(e) from e

    def restore(self, step: int, state):
        """The checkpoint at `step`, shaped and sharded like `state`."""
        target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                              state_tree(state))
        try:
            tree = self.manager.restore(step, args=ocp.args.StandardRestore(target))
        except ValueError as e:  # a tree or shape mismatch with the model being trained
            raise BertJaxError(f"{self.directory}/{step}: checkpoint does not fit this model "
                               f"({str(e).splitlines()[0][:200]})") from None
        return state.replace(step=tree["step"], params=tree["params"],
                             opt_state=tree["opt_state"])

    def wait(self) -> None:
        try:
            self.manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001
            raise self._failed(e) from e

    def _failed(self, error: Exception) -> BertJaxError:
        """One line: why the save failed and which complete checkpoint a rerun resumes from.

        The half-written step stays in a temporary directory that is never restored and is
        deleted on the next start.
        """
        self.failed = True
        chain, e = [], error
        while e is not None and len(chain) < 10:  # orbax wraps the writer's error
            chain.append(e)
            e = e.__cause__ or e.__context__
        errno = next((e.errno for e in chain if isinstance(e, OSError) and e.errno), None)
        code = re.search(r"os_error_code='?(\d+)", " ".join(map(str, chain)))  # tensorstore's
        text = str(error).strip()
        reason = (os.strerror(errno or int(code.group(1))) if errno or code else
                  text.splitlines()[0][:200] if text else type(error).__name__)
        latest = self.manager.latest_step()
        kept = (f"the last complete checkpoint, step {latest}, is intact and the same command "
                f"resumes from it" if latest is not None else "no complete checkpoint was kept")
        return BertJaxError(f"{self.directory}: saving a checkpoint failed ({reason}); {kept}")

    def close(self) -> None:
        """Finish pending saves and release the manager (quietly after a failed save, so the
        first error is the one reported)."""
        try:
            self.manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001
            if not self.failed:
                raise self._failed(e) from e
        finally:
            self.manager.close()
