"""The multi-process watchdog's decisions, with a fake key-value store: a silent peer is lost
after the timeout and not before, an announced error is lost at once, a silent service names
process 0; the coordinator's connection count reads /proc."""

import socket
import time

from bert_jax.runtime import coordinator, multihost


class FakeStore:
    """The two calls the watchdog makes of jax's DistributedRuntimeClient."""

    def __init__(self):
        self.values, self.down = {}, False

    def key_value_set(self, key, value, allow_overwrite=False):
        if self.down:
            raise RuntimeError("UNAVAILABLE")
        assert allow_overwrite or key not in self.values
        self.values[key] = value

    def key_value_dir_get(self, prefix):
        if self.down:
            raise RuntimeError("UNAVAILABLE")
        return [(k, v) for k, v in self.values.items() if k.startswith(prefix)]


def test_a_peer_is_lost_after_the_timeout_of_silence_and_not_before():
    store = FakeStore()
    dog = multihost.Watchdog(store, 0, 3, timeout=2.0)
    started = time.monotonic()
    for _ in range(40):  # 4 s: process 1 beats, process 2 never does
        store.values["bert_jax/beat/1"] = str(time.monotonic())
        time.sleep(dog.interval)
        dog.beat_once()
        lost = dog.lost()
        if lost is not None:
            break
    waited = time.monotonic() - started
    assert lost == (2, "no heartbeat for 2 s")
    assert 2.0 <= waited < 3.0


def test_an_announced_error_is_lost_at_once():
    store = FakeStore()
    dog = multihost.Watchdog(store, 1, 2, timeout=60)
    store.values["bert_jax/beat/0"] = "failed config.vocab: no such file"
    dog.beat_once()
    assert dog.lost() == (0, "it stopped: config.vocab: no such file")


def test_a_silent_service_names_the_coordinator():
    store = FakeStore()
    dog = multihost.Watchdog(store, 1, 2, timeout=0.5)
    store.down = True
    time.sleep(0.6)
    dog.beat_once()
    assert dog.lost() == (0, "its coordination service has not answered for 0.5 s")


def test_connected_clients_counts_established_connections_to_the_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert coordinator.connected_clients(port) == 0
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = server.accept()
            assert coordinator.connected_clients(port) == 1
            accepted.close()


def test_a_busy_coordinator_port_is_refused_in_one_line():
    import pytest

    from bert_jax.errors import BertJaxError
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BertJaxError, match=rf"^coordinator_address localhost:{port}: cannot "
                                               rf"start the coordination service on port {port} "
                                               rf"\(.+\)$"):
            coordinator.start(f"localhost:{port}", 2, 300, 60, 5)
