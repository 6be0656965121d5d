"""Run the app on uvicorn, on a listening socket with a fixed send buffer.

A stream is paced by its client (``scheduler.py``: synthesis waits while the response cannot be
sent), but what the kernel accepts counts as sent. Left to autotuning, Linux grows a connection's
send buffer up to ``net.ipv4.tcp_wmem``'s maximum (4 MiB by default) for a client that reads nothing:
minutes of mp3 synthesized for nobody. Accepted connections inherit the listening socket's
``SO_SNDBUF``; 256 KiB still carries 5 MB/s at 50 ms of round trip, a hundred times a pcm stream's rate.
"""

from __future__ import annotations

import socket

SEND_BUFFER_BYTES = 256 << 10


def listening_socket(config) -> socket.socket:
    """uvicorn's socket for ``config`` (a ``uvicorn.Config``), with the send buffer its connections inherit."""
    sock = config.bind_socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    return sock


def run(app, *, host: str, port: int, log_level: str) -> None:
    """Serve ``app`` until interrupted (as ``uvicorn.run`` does)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level)
    uvicorn.Server(config).run(sockets=[listening_socket(config)])
