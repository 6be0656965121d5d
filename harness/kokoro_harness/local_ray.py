"""A two-node Ray cluster on this machine, for the book tests and benchmark.

Ray finds its node address by probing public DNS servers and then advertises the host's own
network address, even with ``--node-ip-address 127.0.0.1``. In a network namespace whose only
interface is loopback it finds 127.0.0.1, and every connection stays there, so a local cluster is
only started in one: ``scripts/in-loopback-netns.sh COMMAND`` runs COMMAND in such a namespace.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from kokoro_harness.ports import free_port

RAY = str(Path(sys.executable).parent / "ray")
WRAPPER = "scripts/in-loopback-netns.sh"


def in_loopback_namespace() -> bool:
    """Whether loopback is this process's only network interface."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def _ray(*args: str, env: dict[str, str]) -> None:
    result = subprocess.run([RAY, *args], env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


@contextlib.contextmanager
def local_cluster(temp_dir: str | Path, object_store_mb: int = 100) -> Iterator[str]:
    """A head and a second node, one CPU each, as separate ``ray start`` processes on 127.0.0.1;
    yields the head's address and stops both afterwards, whatever happened."""
    if not in_loopback_namespace():
        raise RuntimeError(
            f"a local Ray cluster is started only where loopback is the one network interface: run {WRAPPER} ..."
        )
    if not Path(RAY).exists():
        raise RuntimeError("the `ray` command is missing: pip install 'kokoro-tvm-ext[ray]'")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    port = free_port()
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    common += ["--object-store-memory", str(object_store_mb * 2**20)]
    head = ["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", str(temp_dir)]
    try:
        _ray("start", *head, *common, env=env)
        _ray("start", "--address", f"127.0.0.1:{port}", *common, env=env)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
