"""A design's progress on disk, so that Ctrl-C loses at most one generation: ``VOICE.npy.design-state`` beside
the output, rewritten atomically after every generation and removed once the voice is written.

The state holds what makes the run what it is (the recordings' hashes, language, seed, method, sizes: ``key``) and
where it is (the optimizer with its random generator, the best candidate, the count of syntheses): a rerun of the
same command goes on from there and ends where an uninterrupted run ends. A state written for other recordings or
options is refused, not overwritten.
"""

from __future__ import annotations

import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from kokoro_tvm_ext.support.cache import atomic_write
from kokoro_tvm_ext.support.errors import InvalidInputError

SUFFIX = ".design-state"
VERSION = 1


@dataclass
class DesignState:
    key: dict  # what the run is: a resumed run must have the same
    stock: dict[str, float]  # each pool voice's similarity to the recordings
    anchors: list[str]
    optimizer: object  # search.CMA or search.Walk, with its random generator
    evaluations: int = 0  # candidates synthesized and scored
    generations: int = 0
    best_x: list[float] | None = None
    best: dict | None = None  # the best candidate's Score, as a dict
    history: list[tuple[int, float]] = field(default_factory=list)  # (evaluations, best total) per generation
    seconds: float = 0.0  # time spent over every run of this design


def state_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + SUFFIX)


def load_state(path: Path, key: dict) -> DesignState | None:
    """The saved state at ``path`` for a run described by ``key``; None when there is none; InvalidInputError
    when it was written for another run."""
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Could not import matplotlib")  # cma's, as it is unpickled
            version, state = pickle.load(f)
    except Exception as err:  # noqa: BLE001  (a truncated or foreign file: say which, never a traceback)
        raise InvalidInputError(
            f"cannot read the saved design {path} ({type(err).__name__}); delete it to start over"
        ) from None
    if version != VERSION:
        raise InvalidInputError(
            f"{path} holds a design saved by another version of kokoro-tvm-ext; delete it to start this one"
        )
    if state.key != key:
        changed = sorted(k for k in set(key) | set(state.key) if key.get(k) != state.key.get(k))
        raise InvalidInputError(
            f"{path} holds a design with other {', '.join(changed)}; rerun that command to finish it, or delete the "
            "file to start this one"
        )
    return state


def save_state(path: Path, state: DesignState) -> None:
    with atomic_write(path) as f:
        pickle.dump((VERSION, state), f, protocol=pickle.HIGHEST_PROTOCOL)
