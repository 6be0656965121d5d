"""Cooperative cancellation of a request's planning: a ``threading.Event`` checked between steps.

A server plans on a worker thread that cannot be interrupted from outside; it sets the event when its
client leaves, and the next check (between paragraphs, sentences, or inside a long G2P loop) raises
:class:`~kokoro_tvm_ext.support.errors.RequestCancelled`.
"""

from __future__ import annotations

import threading

from kokoro_tvm_ext.support.errors import RequestCancelled


def check_cancelled(cancel: threading.Event | None) -> None:
    """Raise RequestCancelled when ``cancel`` is set (cheap: call it as often as useful)."""
    if cancel is not None and cancel.is_set():
        raise RequestCancelled("the request was cancelled before its speech was planned")
