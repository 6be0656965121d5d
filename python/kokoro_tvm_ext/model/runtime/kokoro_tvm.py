"""``KokoroTVM``: synthesize speech from a compiled artifact. Needs numpy and TVM's runtime only."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from kokoro_tvm_ext import _native  # noqa: F401  (registers the kernels an artifact calls)
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, holds_checkpoint, load_checked_meta
from kokoro_tvm_ext.model.runtime.cpu_features import check_cpu
from kokoro_tvm_ext.model.runtime.heap import release_free_memory
from kokoro_tvm_ext.model.runtime.noise import make_noise
from kokoro_tvm_ext.model.runtime.threads import set_num_threads
from kokoro_tvm_ext.model.runtime.tvm_runtime import import_tvm, load_vm
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS, load_weights
from kokoro_tvm_ext.model.spec import BOUNDARY_ID, STYLE_DIM, add_boundary_ids, strip_boundary_ids
from kokoro_tvm_ext.support.errors import ArtifactCorruptError, ArtifactMissingError, InvalidInputError


class KokoroTVM:
    """A loaded artifact. ``synthesize`` turns token ids and a style into 24 kHz audio.

    The text stage runs batched (padded, with per-item lengths, so each item
    equals its solo run); alignment by durations happens here on the host (an
    exact gather); the audio stage runs once per item, since items differ in
    frame count.

    Thread-safe: any number of threads may share one instance. Calls into the
    VM are serialized one stage at a time (the VM keeps per-call state; the
    stages already use every core), so threads take turns between stages and
    each result equals its solo run.

    Memory stays bounded whatever lengths come in: the VM allocates through
    TVM's naive allocator, which returns every buffer after the call (TVM's
    default pooled allocator keeps a buffer for every distinct size it has seen,
    and with a symbolic length each new length is a new size), and the heap's
    free pages go back to the system after each audio stage (``heap.py``).
    """

    name = "tvm"

    def __init__(self, out_dir: str | Path, num_threads: int | None = None, allocator: str = "naive"):
        """``num_threads``: threads for this process (see ``set_num_threads``); default ``TVM_NUM_THREADS``,
        else all cores. ``allocator``: ``"naive"`` (bounded memory for any mix of lengths) or TVM's
        ``"pooled"`` (keeps a buffer per distinct size: only for a fixed set of input lengths)."""
        tvm = import_tvm()

        if allocator not in ("naive", "pooled"):
            raise InvalidInputError(f"allocator must be 'naive' or 'pooled', got {allocator!r}")
        if num_threads is not None:
            set_num_threads(num_threads)

        self.out_dir = Path(out_dir)
        self.meta = load_checked_meta(self.out_dir)  # before dlopen: a damaged library would crash it
        check_cpu(self.meta, self.out_dir)  # before any of its code can run: the architecture, then features
        if not holds_checkpoint(self.meta):
            raise ArtifactMissingError(
                f"{self.out_dir} holds a compiled library but no weights (a prebuilt or cross-compiled library); "
                "bind a checkpoint to it (kokoro_tvm_ext.model.binding.bind_checkpoint), or let `kokoro-tvm say "
                "--artifact DIR` bind the default weights to it"
            )
        if self.meta["tvm"] != tvm.__version__:
            raise ArtifactCorruptError(
                f"{self.out_dir} was compiled with TVM {self.meta['tvm']}, this is TVM {tvm.__version__}; compile again"
            )
        self._vm = load_vm(self.out_dir / LIBRARY, tvm, allocator)
        # Each function's weights, passed after its inputs (mapped from weights.bin, not copied).
        self._weights = load_weights(self.out_dir / WEIGHTS, self.meta["weights_index"], tvm)
        self._lock = threading.Lock()
        self._tvm = tvm
        self.sample_rate = self.meta["sample_rate"]
        self.max_tokens = self.meta["max_tokens"]
        self.max_batch = self.meta["max_batch"]
        # Token ids index these tables. Their rows come from the weights the library is handed, whose
        # shapes it checks on every call, so an id beyond them is refused whatever n_token says.
        self.vocab = min(int(self._weights[fn][number].shape[0]) for fn, number in self.meta["token_embeddings"])

    # -- input checks -----------------------------------------------------------
    def _tokens(self, tokens) -> np.ndarray:
        """The phoneme ids of one item, without boundary ids (they may be given or not)."""
        ids = np.asarray(tokens)
        if ids.ndim != 1:
            raise InvalidInputError(f"tokens must be a 1-D array of ids, got shape {ids.shape}")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"tokens must be integer ids, got dtype {ids.dtype}")
        ids = strip_boundary_ids(ids)  # the length limit counts phoneme tokens only
        if ids.size == 0:
            raise InvalidInputError("tokens is empty")
        if ids.size > self.max_tokens:
            raise InvalidInputError(
                f"{ids.size} tokens is too long: at most {self.max_tokens} per call (split the text)"
            )
        bad = ids[(ids < 1) | (ids >= self.vocab)]
        if bad.size:
            raise InvalidInputError(
                f"token ids must be in 1..{self.vocab - 1} ({BOUNDARY_ID} is the boundary id, added here); "
                f"got {bad[:5].tolist()}"
            )
        return ids.astype(np.int64)

    @staticmethod
    def _style(style) -> np.ndarray:
        s = np.asarray(style)
        if s.dtype != np.float32:
            raise TypeError(f"style must be float32, got dtype {s.dtype}")
        if s.size != STYLE_DIM or s.ndim > 2 or (s.ndim == 2 and s.shape[0] != 1):
            raise InvalidInputError(f"style must have shape [1, {STYLE_DIM}], got {list(s.shape)}")
        if not np.isfinite(s).all():
            raise InvalidInputError("style contains NaN or infinity")
        return s.reshape(1, STYLE_DIM)

    @staticmethod
    def _speed(speed) -> float:
        speed = float(speed)
        if not (0.1 <= speed <= 10.0):
            raise InvalidInputError(f"speed must be between 0.1 and 10, got {speed}")
        return speed

    # -- synthesis ----------------------------------------------------------------
    def synthesize(self, tokens, style, speed: float = 1.0, noise_seed: int | None = 0, zero_noise: bool = False):
        """Audio (float32 [N], 24 kHz) and durations (int64 [T+2], frames per id incl. the two boundary ids)."""
        ((audio, durations),) = self.synthesize_batch([tokens], [style], [speed], [noise_seed], zero_noise=zero_noise)
        return audio, durations

    def synthesize_batch(self, tokens_list, styles, speeds=None, noise_seeds=None, zero_noise: bool = False):
        """One (audio, durations) pair per item; each equals its solo ``synthesize``."""
        return list(self.iter_batch(tokens_list, styles, speeds, noise_seeds, zero_noise=zero_noise))

    def iter_batch(self, tokens_list, styles, speeds=None, noise_seeds=None, zero_noise: bool = False):
        """``synthesize_batch``, yielding each item's (audio, durations) as soon as its audio stage is done
        (a server sends the first item's audio while the others are still being made). Every input is
        checked before anything runs."""
        n = len(tokens_list)
        if n == 0:
            raise InvalidInputError("empty batch")
        speeds = [1.0] * n if speeds is None else list(speeds)
        seeds = [0] * n if noise_seeds is None else list(noise_seeds)
        if not (len(styles) == len(speeds) == len(seeds) == n):
            raise InvalidInputError("tokens_list, styles, speeds and noise_seeds must have the same length")
        ids = [self._tokens(t) for t in tokens_list]
        style = np.concatenate([self._style(s) for s in styles])
        speed = np.array([self._speed(s) for s in speeds], np.float32)
        for start in range(0, n, self.max_batch):  # the text stage was compiled for at most max_batch items
            group = slice(start, min(n, start + self.max_batch))
            aligned = self._text_stage(ids[group], style[group], speed[group])
            for b, (dur, en, asr) in enumerate(aligned, start):
                noise = make_noise(
                    en.shape[-1],
                    seeds[b],
                    harmonics=self.meta["harmonics"],
                    samples_per_frame=self.meta["samples_per_frame"],
                    zero_noise=zero_noise,
                )
                (audio,) = self._run(
                    "audio_stage", en, asr, style[b : b + 1], noise["phase_noise"], noise["sine_noise"]
                )
                release_free_memory()  # the audio stage's buffers, sized by this item's frame count
                yield audio.reshape(-1), dur

    def _text_stage(self, ids: list[np.ndarray], style: np.ndarray, speed: np.ndarray):
        """Durations and the duration-aligned features (en, asr) of each item, one batched call."""
        wrapped = [add_boundary_ids(t) for t in ids]
        lengths = np.array([len(w) for w in wrapped], np.int64)
        padded = np.full((len(ids), int(lengths.max())), BOUNDARY_ID, np.int64)  # the boundary id pads too
        for b, w in enumerate(wrapped):
            padded[b, : len(w)] = w
        pred_dur, d, t_en = self._run("text_stage", padded, lengths, style, speed)
        aligned = []
        for b, length in enumerate(lengths):
            dur = pred_dur[b, :length].astype(np.int64)
            index = np.repeat(np.arange(length), dur)
            en, asr = d[b][index].T[None], t_en[b][:, index][None]
            aligned.append((dur, np.ascontiguousarray(en), np.ascontiguousarray(asr)))
        return aligned

    def _run(self, fn: str, *arrays):
        tvm = self._tvm
        inputs = [tvm.runtime.tensor(np.ascontiguousarray(a)) for a in arrays]
        with self._lock:
            out = self._vm[fn](*inputs, *self._weights.get(fn, ()))
            outs = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
            return [o.numpy() for o in outs]
