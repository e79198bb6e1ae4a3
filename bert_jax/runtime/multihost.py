"""A multi-process run that ends, never hangs: joining, a lost peer, a mismatched launch.

Left to itself, a jax.distributed run whose peer dies fails in a collective with a gloo error,
then waits in the coordination service's shutdown barrier and aborts with a C++ stack trace; a
dead process 0 takes the service with it and aborts every other process at once. Here:

- process 0 runs the service in a child process (runtime/coordinator.py), and JAX's own
  heartbeat is set far longer than ours, so no process is aborted from C++;
- a watchdog thread in every process beats into the service's key-value store and watches the
  others' beats: a process silent for `heartbeat_timeout` seconds, or one that announced its
  own error, ends every other process within a second, in one line naming the lost process, the
  step and the last complete checkpoint (`os._exit`: no shutdown barrier waits for the dead);
- a process that never joins ends the others after `initialization_timeout`, in one line;
- `check_same_launch` compares the config, data, vocabulary and code of every process before
  the first step; `check_shared_directory` refuses checkpoints on storage not all processes see.

SIGTERM is JAX's preemption notice in a multi-process run (training/loop.StopRequest uses the
preemption sync point, so all processes save at the same step).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import secrets
import sys
import threading
import time
from typing import Optional

from bert_jax.errors import BertJaxError

log = logging.getLogger("bert_jax")

EXIT_LOST = 3  # a peer was lost or never joined: rerun all processes
DEFAULT_HEARTBEAT_TIMEOUT = 20  # seconds; the lost-peer exit comes within this + ~1 s
_KEYS = "bert_jax/"


class _Run:
    """This process's view of the multi-process run (None fields: single process)."""

    watchdog: Optional["Watchdog"] = None
    coordinator = None  # process 0's service child process
    prog = "bert-jax"
    say = staticmethod(lambda message: message)  # the CLI names flags instead of parameters
    rounds = 0  # _agree calls so far: every process makes them in the same order
    step: Optional[int] = None  # the step the loop last finished
    checkpoints: Optional[str] = None  # the run's checkpoint directory
    bar_open = False  # the loop's progress bar is on stderr's current line
    exiting = threading.Lock()  # the first of the failure paths to take it is the one reported


RUN = _Run()


def active() -> bool:
    return RUN.watchdog is not None


def initialize(coordinator_address: str, num_processes: int, process_id: int,
               initialization_timeout: int = 300,
               heartbeat_timeout: int = DEFAULT_HEARTBEAT_TIMEOUT,
               prog: str = "bert-jax", say=None) -> None:
    """jax.distributed.initialize, with the service in a child of process 0, a join deadline
    and the watchdog."""
    import jax
    from jax._src import distributed

    from bert_jax.runtime import coordinator
    if heartbeat_timeout < 2 or initialization_timeout < 1:
        raise BertJaxError("heartbeat_timeout must be at least 2 s and initialization_timeout "
                           "at least 1 s")
    RUN.prog = prog
    if say is not None:
        RUN.say = say
    deadline = threading.Timer(initialization_timeout, _exit, args=(
        f"process {process_id} of {num_processes}: not all {num_processes} processes joined "
        f"{coordinator_address} within {initialization_timeout} s (initialization_timeout); "
        f"start every process with the same coordinator_address and num_processes",))
    deadline.daemon = True
    deadline.start()
    jax_heartbeat = max(10 * heartbeat_timeout, 300)  # ours always notices first
    real = distributed._jax  # jax's own initialize, minus the in-process service
    try:
        if process_id == 0:
            RUN.coordinator = coordinator.start(coordinator_address, num_processes,
                                                jax_heartbeat, initialization_timeout + 60,
                                                grace=heartbeat_timeout + 10)
        distributed._jax = _WithoutService(real)
        jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                   initialization_timeout=initialization_timeout + 60,
                                   heartbeat_timeout_seconds=jax_heartbeat)
    finally:
        distributed._jax = real
        deadline.cancel()
    RUN.watchdog = Watchdog(distributed.global_state.client, process_id, num_processes,
                            heartbeat_timeout)
    RUN.watchdog.start()
    log.info("process %d of %d joined %s; lost peers end the run after %d s", process_id,
             num_processes, coordinator_address, heartbeat_timeout)


class _WithoutService:
    """jaxlib's module, except that process 0 does not start the service (ours runs it)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    @staticmethod
    def get_distributed_runtime_service(*args, **kwargs):
        return None


class Watchdog:
    """Beats into the key-value store every `interval` and ends this process when a peer's
    beat stops for `timeout` seconds, a peer announced an error, or the service stopped
    answering (process 0 gone with its child, or the network)."""

    def __init__(self, client, process_id: int, num_processes: int, timeout: float):
        self.client, self.pid, self.count, self.timeout = client, process_id, num_processes, timeout
        self.interval = min(1.0, timeout / 10)
        now = time.monotonic()
        self.seen = {p: (None, now) for p in range(num_processes) if p != process_id}
        self.contact = now
        self.failed: dict[int, str] = {}
        self.stopped = threading.Event()
        self.beats = 0

    def start(self) -> None:
        for target in (self._beat, self._watch):
            threading.Thread(target=target, daemon=True, name=f"bert_jax{target.__name__}").start()

    def stop(self) -> None:
        self.stopped.set()

    def announce(self, message: str, wait: float = 1.0) -> None:
        """Tell the others this process is ending with `message`, so that they need not wait
        for its silence; gives up after `wait` seconds (the service may be unreachable)."""
        def post():
            try:
                self.client.key_value_set(f"{_KEYS}beat/{self.pid}", f"failed {message}",
                                          allow_overwrite=True)
            except Exception:  # noqa: BLE001 - the service is gone: they will time out
                pass
        poster = threading.Thread(target=post, daemon=True)
        poster.start()
        poster.join(wait)

    def _beat(self) -> None:
        while not self.stopped.wait(self.interval):
            self.beat_once()

    def beat_once(self) -> None:
        """Post this process's beat and read the others' (what the beat thread repeats)."""
        self.beats += 1
        try:
            self.client.key_value_set(f"{_KEYS}beat/{self.pid}", str(self.beats),
                                      allow_overwrite=True)
            entries = dict(self.client.key_value_dir_get(f"{_KEYS}beat/"))
        except Exception:  # noqa: BLE001 - no answer: `contact` ages, _watch decides
            return
        now = time.monotonic()
        self.contact = now
        for p, (value, _) in list(self.seen.items()):
            new = entries.get(f"{_KEYS}beat/{p}")
            if new is not None and new.startswith("failed "):
                self.failed[p] = new[len("failed "):]
            if new != value:
                self.seen[p] = (new, now)

    def _watch(self) -> None:
        while not self.stopped.wait(0.25):
            lost = self.lost()
            if lost is not None and not self.stopped.is_set():
                process, why = lost
                _exit(f"lost process {process} of {self.count} ({why}) {_where()}; rerun all "
                      f"processes to resume")

    def lost(self) -> Optional[tuple[int, str]]:
        """(process, why) of the first peer lost, or None."""
        for p, message in self.failed.items():
            return p, f"it stopped: {message}"
        now = time.monotonic()
        if now - self.contact > self.timeout:
            return 0, f"its coordination service has not answered for {self.timeout:g} s"
        for p, (_, when) in self.seen.items():
            if now - when > self.timeout:
                return p, f"no heartbeat for {self.timeout:g} s"
        return None


def _where() -> str:
    """"at step S; the last complete checkpoint is …" for the lost-peer line."""
    from bert_jax.model_files.paths import complete_steps
    step = "before the first step" if RUN.step is None else f"at step {RUN.step}"
    done = complete_steps(RUN.checkpoints) if RUN.checkpoints else []
    kept = (f"the last complete checkpoint is step {done[-1]} in {RUN.checkpoints}" if done
            else "no checkpoint is complete yet")
    return f"{step}; {kept}"


def _exit(message: str, code: int = EXIT_LOST) -> None:
    """abort() with `prog: error: message`, the parameters in it named as the CLI's flags."""
    abort(f"{RUN.prog}: error: {RUN.say(message)}", code)


def abort(line: str, code: int) -> None:
    """Print `line` (on a line of its own, below the progress bar), tell the other processes
    (so that none waits in a collective for this one) and end this process now, skipping the
    shutdown barrier (it would wait for a lost peer). The first caller wins; others wait."""
    RUN.exiting.acquire()
    sys.stdout.flush()
    sys.stderr.write(("\n" if RUN.bar_open else "") + line + "\n")
    sys.stderr.flush()
    if RUN.watchdog is not None:
        RUN.watchdog.stop()
        RUN.watchdog.announce(line.split(": error: ", 1)[-1])
    os._exit(code)


def wait_for_lost_peer() -> None:
    """After a collective failed: give the watchdog the time it needs to name the lost peer
    (it ends the process); returns if every peer still beats after that."""
    if active():
        time.sleep(RUN.watchdog.timeout + 2 * RUN.watchdog.interval + 0.5)


def note_step(step: int, checkpoints: Optional[str] = None) -> None:
    """Where the run is, for the lost-peer line."""
    RUN.step = step
    if checkpoints is not None:
        RUN.checkpoints = checkpoints


def finish() -> None:
    """End a multi-process run that went well: wait (watched) until every process got here,
    then shut the distributed runtime down, which now passes its barrier at once."""
    if not active():
        return
    import jax
    _agree("end", "1")
    jax.distributed.shutdown()  # still watched: a peer lost just now ends this process
    RUN.watchdog.stop()
    if RUN.coordinator is not None:
        from bert_jax.runtime import coordinator
        coordinator.stop(RUN.coordinator)
    RUN.watchdog = None


def _agree(name: str, value: str) -> dict[int, str]:
    """Post `value` under `name` and read every process's (waiting while the watchdog keeps
    watch: a dead peer ends this process, a slow one is waited for)."""
    client, count = RUN.watchdog.client, RUN.watchdog.count
    RUN.rounds += 1
    name = f"{_KEYS}{name}-{RUN.rounds}"
    client.key_value_set(f"{name}/{RUN.watchdog.pid}", value)
    values = {}
    for p in range(count):
        key = f"{name}/{p}"
        while p not in values:
            try:
                values[p] = client.blocking_key_value_get(key, 1000)
            except Exception:  # noqa: BLE001 - not there yet (DEADLINE_EXCEEDED)
                pass
    return values


def check_same_launch(items: dict[str, str]) -> None:
    """Refuse, on every process and before the first step, a launch whose `items` (config
    fields, data, vocabulary, code: name → value) differ from process 0's, naming the first
    difference."""
    if not active():
        return
    launches = {p: json.loads(v) for p, v in _agree("launch", json.dumps(items)).items()}
    first = launches[0]
    for p in range(1, len(launches)):
        theirs = launches[p]
        for name in list(first) + [n for n in theirs if n not in first]:
            a, b = first.get(name, "nothing"), theirs.get(name, "nothing")
            if a != b:
                raise BertJaxError(
                    f"{name}: process 0 has {a}, process {p} has {b}; start every process with "
                    f"the same config, data, vocabulary and code (refused before step 1)")


def launch_items(cfg, model_config, vocab_hash: str, data: dict[str, str]) -> dict[str, str]:
    """What every process of a job must agree on, name → value, for check_same_launch: each
    field of the job's config dataclass, the model config, the vocabulary, the job's data
    (`data`: name → a summary with a digest) and the code."""
    items = {f"config.{k}": json.dumps(v) for k, v in dataclasses.asdict(cfg).items()}
    items["the model"] = digest(model_config.to_dict())
    items["the vocabulary"] = vocab_hash[:12]
    items.update(data)
    items["the code"] = code_version()
    return items


def digest(value) -> str:
    """A short digest of a JSON-able value, for launch items too long to print."""
    return hashlib.blake2b(json.dumps(value, sort_keys=True).encode(), digest_size=6).hexdigest()


def code_version() -> str:
    """bert_jax's version and a digest of its source (an edited checkout differs), with JAX's."""
    import jax
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = hashlib.blake2b(digest_size=6)
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            source.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                source.update(f.read())
    from importlib import metadata
    try:
        version = metadata.version("bert_jax")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"bert_jax {version} (source {source.hexdigest()}), jax {jax.__version__}"


def check_shared_directory(directory: str) -> None:
    """Multi-process checkpoints are one orbax checkpoint written by all processes into one
    directory: refuse one that some process does not see as process 0 does."""
    if not active():
        return
    pid = RUN.watchdog.pid
    token = _agree("share-token", secrets.token_hex(8) if pid == 0 else "")[0]
    probe = os.path.join(directory, f".bert_jax-shared-{token}")
    if pid == 0:
        os.makedirs(directory, exist_ok=True)
        with open(probe, "w") as f:
            f.write("written by process 0 to check that every process sees this directory\n")
    _agree("share-written", "1")
    seen = _agree("share-seen", "yes" if os.path.isfile(probe) else "no")
    if pid == 0:
        os.remove(probe)
    blind = [p for p, v in seen.items() if v != "yes"]
    if blind:
        raise BertJaxError(
            f"{directory}: process {blind[0]} does not see the files process 0 writes there; "
            f"the checkpoints of a multi-process run need one directory that every process "
            f"shares (a network or cluster file system): set config.checkpoint_dir to one")
