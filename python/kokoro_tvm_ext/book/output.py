"""Finished chapters -> the book on disk: one ``.m4b``/``.mp3`` with chapter markers, or a
directory of per-chapter files; optional per-chapter ``.srt``. Every file is written to a
temp name and renamed, so an interrupted or failed write leaves no partial file.

Encoding goes through FFmpeg via PyAV (the ``serve`` extra): AAC in an MPEG-4 audiobook
(chapters as a QuickTime chapter track and Nero ``chpl``), MP3 with ID3v2 ``CHAP`` frames.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.errors import InvalidInputError, MissingAssetError, UnwritablePathError
from kokoro_tvm_ext.support.cache import check_writable_file

# suffix -> (muxer, codec, the codec's sample format, bit rate or None)
FILE_FORMATS = {
    ".m4b": ("ipod", "aac", "fltp", 96_000),
    ".mp3": ("mp3", "libmp3lame", "s16p", 128_000),
}
# per-chapter files in a directory
CHAPTER_FORMATS = {
    "wav": ("wav", "pcm_s16le", "s16", None),
    "flac": ("flac", "flac", "s16", None),
    "mp3": FILE_FORMATS[".mp3"],
    "m4a": ("ipod", "aac", "fltp", 96_000),
}


@dataclass
class ChapterAudio:
    title: str
    samples: np.ndarray  # int16
    timings: list  # (word, start s, end s, space_after) from the chapter's start


def output_kind(output: str | Path) -> str:
    """``"file"`` for .m4b/.mp3, ``"dir"`` for an existing directory or a name without a suffix."""
    path = Path(output)
    if path.is_dir() or str(output).endswith(os.sep) or not path.suffix:
        return "dir"
    if path.suffix.lower() in FILE_FORMATS:
        return "file"
    raise InvalidInputError(
        f"-o {output}: unknown output type {path.suffix!r}; give a .m4b or .mp3 file "
        "or a directory (one file per chapter)"
    )


def check_writable(output: str | Path) -> None:
    """Fail early, before any speech, if the output cannot be written."""
    path = Path(output).expanduser()
    if output_kind(path) == "file":
        check_writable_file(output)
        return
    parent = path.resolve() if path.is_dir() else path.resolve().parent
    if not parent.is_dir():
        raise UnwritablePathError(f"cannot write {output}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritablePathError(f"cannot write {output}: directory {parent} is not writable")


def _av():
    try:
        import av
    except ImportError:
        raise MissingAssetError("writing audio files needs PyAV: pip install 'kokoro-tvm-ext[book]'") from None
    return av


@contextlib.contextmanager
def _atomic_path(path: Path):
    """A temp path beside ``path``, renamed onto it if the block succeeds, removed otherwise."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def encode(
    path: Path,
    spec: tuple,
    pieces,
    sample_rate: int,
    *,
    title: str | None = None,
    chapters: list[tuple[str, int, int]] | None = None,
) -> None:
    """Encode int16 ``pieces`` one after another into ``path`` (atomically); ``chapters``:
    (title, first sample, end sample)."""
    av = _av()
    muxer, codec, sample_format, bit_rate = spec
    with _atomic_path(path) as tmp:
        with av.open(tmp, mode="w", format=muxer) as out:
            stream = out.add_stream(codec, rate=sample_rate, layout="mono")
            if bit_rate:
                stream.bit_rate = bit_rate
            if title:
                out.metadata["title"] = title
            if chapters:
                out.set_chapters(
                    [
                        {
                            "id": i + 1,
                            "start": start,
                            "end": end,
                            "time_base": Fraction(1, sample_rate),
                            "metadata": {"title": name},
                        }
                        for i, (name, start, end) in enumerate(chapters)
                    ]
                )
            resampler = av.AudioResampler(format=sample_format, layout="mono", rate=sample_rate)
            pts = 0
            for pcm in pieces:
                if not len(pcm):
                    continue
                frame = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(pcm, "<i2")[None, :], format="s16", layout="mono"
                )
                frame.sample_rate, frame.pts = sample_rate, pts
                pts += len(pcm)
                for converted in resampler.resample(frame):
                    out.mux(stream.encode(converted))
            for converted in resampler.resample(None):
                out.mux(stream.encode(converted))
            out.mux(stream.encode(None))


def _safe_name(title: str) -> str:
    name = re.sub(r"[\\/:*?\"<>|\x00-\x1f]", "", title).strip(" .")
    return name[:80] or "chapter"


def write_srt(path: Path, timings) -> None:
    from kokoro_tvm_ext.speech.subtitles import render
    from kokoro_tvm_ext.speech.timestamps import WordTiming
    from kokoro_tvm_ext.support.cache import atomic_write

    words = [WordTiming(w, s, e, bool(space)) for w, s, e, space in timings]
    with atomic_write(path) as f:
        f.write(render(words, ".srt").encode())


def write_book(
    output: str | Path,
    chapters: list[ChapterAudio],
    sample_rate: int,
    *,
    title: str,
    chapter_format: str = "wav",
    subtitles: bool = False,
) -> list[Path]:
    """Write the book; returns the files written."""
    output = Path(output).expanduser()
    written = []
    if output_kind(output) == "file":
        marks, start = [], 0
        for ch in chapters:
            marks.append((ch.title, start, start + len(ch.samples)))
            start += len(ch.samples)
        encode(
            output,
            FILE_FORMATS[output.suffix.lower()],
            (c.samples for c in chapters),
            sample_rate,
            title=title,
            chapters=marks,
        )
        written.append(output)
        names = [output.parent / f"{output.stem}.{i + 1:02d}" for i in range(len(chapters))]
    else:
        if chapter_format not in CHAPTER_FORMATS:
            raise InvalidInputError(f"--format must be one of {', '.join(CHAPTER_FORMATS)}, got {chapter_format!r}")
        output.mkdir(parents=True, exist_ok=True)
        names = [output / f"{i + 1:02d} {_safe_name(c.title)}" for i, c in enumerate(chapters)]
        for name, ch in zip(names, chapters):
            path = name.with_name(f"{name.name}.{chapter_format}")
            encode(path, CHAPTER_FORMATS[chapter_format], [ch.samples], sample_rate, title=ch.title)
            written.append(path)
    if subtitles:
        for name, ch in zip(names, chapters):
            path = name.with_name(f"{name.name}.srt")
            write_srt(path, ch.timings)
            written.append(path)
    return written
