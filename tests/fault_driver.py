"""`train.py` with one injected fault, for tests/test_faults.py (never used by the library).

BERT_JAX_FAULT=kill_at_commit:STEP   SIGKILL this process at the moment orbax renames the
    finished temporary directory of checkpoint STEP into place: every byte of the checkpoint
    written, nothing committed — the worst moment of a save to die.
BERT_JAX_FAULT=disk_full_after:STEP  from the first save call after STEP on, no file may grow
    beyond 64 KiB (RLIMIT_FSIZE, SIGXFSZ ignored): every larger write fails with EFBIG, as it
    would with ENOSPC on a full disk.
"""

import os
import resource
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kill_at_commit(step: str) -> None:
    rename = os.rename

    def rename_then_die(src, dst, *args, **kwargs):
        if ".orbax-checkpoint-tmp" in os.fspath(src) and os.path.basename(os.fspath(dst)) == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return rename(src, dst, *args, **kwargs)

    os.rename = rename_then_die


def _disk_full_after(step: str) -> None:
    from bert_jax.runtime import train_state_checkpoints as checkpoint
    save, full = checkpoint.Checkpointer.save, []

    def save_on_a_full_disk(self, at, state, force=False):
        if at > int(step) and not full:
            self.wait()  # checkpoint STEP is complete before the disk fills
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
            full.append(at)
        return save(self, at, state, force)

    checkpoint.Checkpointer.save = save_on_a_full_disk


if __name__ == "__main__":
    kind, _, arg = os.environ.get("BERT_JAX_FAULT", "").partition(":")
    {"kill_at_commit": _kill_at_commit, "disk_full_after": _disk_full_after}[kind](arg)
    from bert_jax.cli import main
    sys.exit(main(["pretrain", *sys.argv[1:]]))
