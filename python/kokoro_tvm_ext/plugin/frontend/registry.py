"""The one table of our ATen converters, keyed as TVM's importer keys ops.

TVM's ExportedProgramImporter looks a node up by ``node.target.__name__``
(e.g. ``"clamp.default"``) and calls a *custom* converter as
``converter(node, importer)``. Entries here are handed to TVM through the
public ``custom_convert_map=`` argument; nothing in TVM is patched.
"""

from __future__ import annotations

from collections.abc import Callable

Converter = Callable[..., object]

CONVERTERS: dict[str, Converter] = {}


def converter(*op_names: str) -> Callable[[Converter], Converter]:
    """Register the decorated function for each ATen overload name given."""

    def register(fn: Converter) -> Converter:
        for name in op_names:
            if name in CONVERTERS:
                raise ValueError(f"two converters for {name}: {CONVERTERS[name]} and {fn}")
            CONVERTERS[name] = fn
        return fn

    return register
