"""Units of a book spread over a Ray cluster with Ray Core tasks (the ``ray`` extra).

Each unit is one task. Ray keeps a worker process per task slot and reuses it, and
the task body (``render.render_in_process``) keeps its Speaker loaded in that
process, so a worker loads it once. A task whose worker dies (killed, out of memory,
its node lost) is run again elsewhere (``max_retries``); the driver keys results by
unit, so nothing is lost or counted twice. Every node needs this package and the
artifact at the same path (``--artifact``, or the same cache directory).
"""

from __future__ import annotations

import socket
from dataclasses import replace

from kokoro_tvm_ext.book.plan import Unit
from kokoro_tvm_ext.book.render import Reading, UnitAudio, render_in_process
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.support.errors import ArtifactMissingError, InvalidInputError, KokoroError, MissingAssetError

TASK_RETRIES = 5


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingAssetError("--ray needs Ray: pip install 'kokoro-tvm-ext[ray]'") from None
    return ray


def _render_task(config: SpeakerConfig, unit: Unit, reading: Reading) -> UnitAudio:
    try:
        return render_in_process(config, unit, reading)
    except ArtifactMissingError as err:
        raise ArtifactMissingError(
            f"on node {socket.gethostname()}: {err}; every node needs the artifact at the same path "
            "(copy it there, or give --artifact)"
        ) from None


def _check_reachable(address: str) -> None:
    """Fail at once on a host:port nobody listens on (Ray itself retries for minutes)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidInputError(f"--ray {address}: expected host:port or auto")
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as err:
        raise KokoroError(f"--ray {address}: cannot connect to a Ray cluster there ({err.strerror or err})") from None


class RayExecutor:
    """Connects to the cluster at ``address`` (``auto``: the one this machine belongs to); every task opens
    ``config`` (resolved: its artifact found, at the same path on every node), on ``config.threads`` (default 1)."""

    def __init__(self, address: str, config: SpeakerConfig):
        ray = _ray()
        self._ray = ray
        threads = config.threads or 1
        self.config, self.threads = replace(config, threads=threads, lexicon=None), threads
        _check_reachable(address)
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise KokoroError(f"--ray {address}: cannot connect to a Ray cluster ({err})") from None
        self._task = ray.remote(_render_task).options(
            num_cpus=threads, max_retries=TASK_RETRIES, retry_exceptions=False
        )
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = max(1, cpus // threads)

    def run(self, units: list[Unit], reading: Reading):
        """Each unit's audio as it completes; at most two units per slot in flight, so results
        do not pile up in the object store."""
        ray = self._ray
        reading_ref = ray.put(reading)
        queue = list(units)
        queue.reverse()
        pending: dict = {}
        while queue or pending:
            while queue and len(pending) < 2 * self.slots:
                unit = queue.pop()
                pending[self._task.remote(self.config, unit, reading_ref)] = unit.key
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                key = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as err:
                    if isinstance(err.cause, KokoroError):
                        raise err.cause from None
                    raise
                if result.key != key:
                    raise RuntimeError(f"book: unit {key} came back as {result.key}")
                yield result

    def close(self) -> None:
        self._ray.shutdown()
