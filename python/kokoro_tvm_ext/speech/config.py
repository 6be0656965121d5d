"""What a :class:`~kokoro_tvm_ext.speech.speaker.Speaker` is opened from: one config every front end fills.

``say``, ``serve``, ``wyoming``, ``book`` (here or on Ray workers), the Ray Serve deployment and Python code all
describe the model they want with a :class:`SpeakerConfig` and open it with ``Speaker.open(config)``; only this
module knows how a config becomes a model (the cached artifact found, bound or compiled by the model layer's
``ensure_artifact``, or PyTorch's reference). A config is plain data: it pickles, so a Ray driver resolves it
once (``resolved()``) and ships it to its workers, which open the same artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
from kokoro_tvm_ext.model.runtime import KokoroTVM, set_num_threads
from kokoro_tvm_ext.model.runtime.artifact import PRECISIONS, identity
from kokoro_tvm_ext.model.weights import load_kmodel
from kokoro_tvm_ext.speech.lexicon import Lexicon, load_lexicon
from kokoro_tvm_ext.support.errors import ArtifactMissingError, InvalidInputError

BACKENDS = ("tvm", "torch")


@dataclass(frozen=True)
class SpeakerConfig:
    """The model a Speaker runs and what it reads text with.

    - ``artifact``: a compiled artifact directory (a library-only one, such as ``kokoro-tvm compile --target``
      makes for another machine, gets ``weights`` bound to it into the cache on first use); None: the cached
      artifact for ``weights``, ``precision`` and ``target`` (bound to a compiled library in seconds, or
      compiled once);
    - ``weights``: a Kokoro-82M checkpoint (``.safetensors`` or ``.pth``); None: ``$KOKORO_TVM_WEIGHTS``, the
      HuggingFace cache, else the offline rebuild;
    - ``precision``: ``fp32``, ``bf16`` or ``int8`` (see ``kokoro-tvm say --help``);
    - ``target``: the CPU to compile for (an LLVM CPU name or a TVM target dict); None: this machine's;
    - ``threads``: threads for the model; None: ``$TVM_NUM_THREADS``, else every core;
    - ``lexicon``: a lexicon file (or a loaded :class:`Lexicon`) whose pronunciations win over the G2P's;
    - ``backend``: ``tvm`` (the compiled artifact) or ``torch`` (PyTorch's eager KModel, for comparison).
    """

    artifact: str | Path | None = None
    weights: str | Path | None = None
    precision: str = "fp32"
    target: str | dict | None = None
    threads: int | None = None
    lexicon: str | Path | Lexicon | None = None
    backend: str = "tvm"

    def check(self, *, as_flags: bool = False) -> None:
        """Every value a user can get wrong, before anything slow (a compile, loading weights): one line
        naming the option and the fix (as a command-line flag, ``--threads``, when ``as_flags``)."""

        def name(field: str) -> str:
            return f"--{field}" if as_flags else field

        if self.precision not in PRECISIONS:
            raise InvalidInputError(
                f"{name('precision')} must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.backend not in BACKENDS:
            raise InvalidInputError(f"{name('backend')} must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)):
            raise InvalidInputError(f"{name('threads')} must be a whole number, got {self.threads!r}")
        if self.threads is not None and self.threads < 1:
            raise InvalidInputError(f"{name('threads')} must be at least 1, got {self.threads}")
        if self.artifact is not None and not Path(self.artifact).expanduser().is_dir():
            raise ArtifactMissingError(f"{name('artifact')} {self.artifact}: no such directory")
        if self.artifact is not None and self.backend == "torch":
            raise InvalidInputError(
                f"the torch backend runs the weights, not a compiled artifact: give {name('weights')}"
            )

    def with_lexicon_read(self) -> SpeakerConfig:
        """This config holding its lexicon read and checked (a malformed line is one InvalidInputError naming
        file:line), so that opening it, here or on a worker, reads no file."""
        return replace(self, lexicon=self.read_lexicon())

    def read_lexicon(self) -> Lexicon | None:
        """The lexicon read and checked (a malformed line is one InvalidInputError naming file:line)."""
        return load_lexicon(self.lexicon)

    def resolved(self, *, quiet: bool = False) -> SpeakerConfig:
        """This config with ``artifact`` found (for the ``tvm`` backend): the cached artifact for the weights,
        bound or compiled on first use; a given library-only ``artifact`` (cross-compiled for this machine, or
        prebuilt) with the weights bound to it, into the cache. What a driver ships to workers that must open
        the same artifact."""
        self.check()
        if self.backend != "tvm":
            return self
        if self.artifact is not None:
            given = Path(self.artifact).expanduser()
            artifact = ensure_artifact(self.weights, artifact=given, quiet=quiet)
            return self if artifact == given else replace(self, artifact=artifact)
        self._start_threads()  # a compile runs on them too
        artifact = ensure_artifact(self.weights, precision=self.precision, target=self.target, quiet=quiet)
        return replace(self, artifact=Path(artifact))

    def artifact_identity(self) -> tuple[str, int]:
        """``(sha256 of the artifact's metadata, its sample rate)`` of a ``resolved()`` config, without loading
        the model: what a driver keys its results by, and their rate."""
        return identity(Path(self.artifact).expanduser())

    def open_model(self, *, quiet: bool = False):
        """The model this config names: ``KokoroTVM`` on the artifact, or PyTorch's reference for ``torch``."""
        self._start_threads()
        if self.backend == "torch":
            from kokoro_tvm_ext.model.adapters.reference import TorchKokoro

            return TorchKokoro(load_kmodel(self.weights), num_threads=self.threads)
        return KokoroTVM(Path(self.resolved(quiet=quiet).artifact).expanduser())

    def _start_threads(self) -> None:
        """The thread count set before anything starts a thread pool (TVM's and ours start once)."""
        if self.threads is not None:
            set_num_threads(self.threads)
