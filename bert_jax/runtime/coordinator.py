"""The coordination service of a multi-process run, in a small process of its own.

jax.distributed runs the service inside process 0. When process 0 dies, every other process's
client sees the service vanish and aborts at once, with a page of C++ stack trace, before
anything of ours can say which process was lost. Here process 0 starts the service as a child
process instead (`start`), so a dead process 0 is noticed like any other: its heartbeats stop
(runtime/multihost.py's watchdog). The child ends once its parent has ended and no client is
connected any more (or `grace` seconds after its parent died, whichever comes first), so a
rerun can bind the port again.

Run as `python -m bert_jax.runtime.coordinator PORT NUM_PROCESSES HEARTBEAT REGISTER GRACE`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

from bert_jax.errors import BertJaxError

READY = "ready"


def start(address: str, num_processes: int, heartbeat_timeout: int, register_timeout: int,
          grace: float) -> subprocess.Popen:
    """Start the service for `num_processes` on the port of `address`; returns once it listens."""
    port = address.rsplit(":", 1)[-1]
    log = tempfile.TemporaryFile("w+")  # not a pipe: nobody reads the service's later logs
    proc = subprocess.Popen(
        [sys.executable, "-m", "bert_jax.runtime.coordinator", port, str(num_processes),
         str(heartbeat_timeout), str(register_timeout), str(grace)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
        start_new_session=True)  # a Ctrl-C meant for the job is the job's to handle
    line = proc.stdout.readline().strip()
    if line != READY:
        proc.wait()
        log.seek(0)
        reason = (log.read().strip().splitlines() or ["it exited"])[-1]
        raise BertJaxError(f"coordinator_address {address}: cannot start the coordination "
                           f"service on port {port} ({reason[:200]})")
    return proc


def stop(proc: subprocess.Popen) -> None:
    """Ask the service to end once its clients have disconnected (it does not wait for that)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)


def connected_clients(port: int) -> int:
    """TCP connections established to `port` on this machine (-1: unknown, no /proc)."""
    count, found = 0, False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        found = True
        for row in rows:
            fields = row.split()
            local, state = fields[1], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count if found else -1


def _serve(port: int, num_processes: int, heartbeat: int, register: int, grace: float) -> None:
    from jax._src.lib import _jax
    parent = os.getppid()
    ending = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(time.monotonic()))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    service = _jax.get_distributed_runtime_service(  # noqa: F841 - it serves while referenced
        f"[::]:{port}", num_processes, heartbeat_timeout=heartbeat,
        cluster_register_timeout=register, shutdown_timeout=register)
    print(READY, flush=True)
    while True:
        time.sleep(0.2)
        if not ending and os.getppid() != parent:  # the parent died without stopping us
            ending.append(time.monotonic())
        if ending and (connected_clients(port) == 0 or time.monotonic() - ending[0] > grace):
            os._exit(0)  # without a shutdown barrier: the clients are gone or given up on


if __name__ == "__main__":
    port, count, heartbeat, register = map(int, sys.argv[1:5])
    _serve(port, count, heartbeat, register, float(sys.argv[5]))
