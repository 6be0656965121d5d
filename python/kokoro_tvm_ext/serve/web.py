"""The page at ``/web``: try the voices in a browser. Static files from ``serve/web/``, served by us (no CDN)."""

from __future__ import annotations

from pathlib import Path

from fastapi.staticfiles import StaticFiles

PAGE_DIR = Path(__file__).with_name("web")


def install(app) -> None:
    """Serve ``serve/web/`` at ``/web`` (``index.html`` at ``/web/``)."""
    app.mount("/web", StaticFiles(directory=PAGE_DIR, html=True), name="web")
