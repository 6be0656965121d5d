"""Byte counts for people to read, in the binary units the CLI's size flags use (``--max-book-bytes``: 256 MiB)."""

from __future__ import annotations


def human_size(n: float) -> str:
    """``1000 bytes``, ``732.4 KiB``, ``2.1 GiB``."""
    if n < 1024:
        return f"{n:.0f} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
