"""The names of a book's files, within what the filesystem allows, and the temp files a killed run left.

A file name may hold at most ``NAME_MAX`` bytes (255 on most filesystems), however few characters
that is: 85 Chinese characters, 63 emoji. A chapter's file is named by its number and title,
cut on a character boundary to leave ``ROOM`` bytes for a suffix (``.flac``, ``.srt``) and
the temp name it is written under first (``.NAME.book-XXXXXXXX.tmp``). The number keeps the
names unique whatever the cut.

Every output file is written under such a temp name and renamed once all are ready
(``support.cache.AtomicFiles``); a run killed outright (SIGKILL, power loss) leaves only
temp files, which the next run recognises by name and removes.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

TEMP_TAG = "book-"  # in every temp name of a book's output: .NAME.book-XXXXXXXX.tmp
ROOM = 32  # bytes of a name kept for a suffix (".flac", ".123.srt") and the temp name around it
DEFAULT_NAME_MAX = 255
_TEMP = re.compile(r"^\.(?P<final>.+)\.(?P<tag>book-)?[a-z0-9_]{8}\.tmp$")  # mkstemp's 8 random characters
_CHAPTER_FILE = re.compile(r"^\d+ .*\.(wav|flac|mp3|m4a|srt)$")
_UNSAFE = re.compile(r"[\\/:*?\"<>|]")  # not allowed in names on some filesystem a book may be copied to


def name_max(directory: Path) -> int:
    """The longest file name in bytes ``directory``'s filesystem allows."""
    try:
        limit = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # no such limit known, or no pathconf here
        return DEFAULT_NAME_MAX
    return limit if limit > 0 else DEFAULT_NAME_MAX


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, between characters."""
    return text.encode()[:limit].decode("utf-8", "ignore")


def _clean(title: str) -> str:
    # Control, format and unassigned characters and lone surrogates make names that cannot be
    # typed, shown or (surrogates) encoded; runs of white space become one space.
    kept = "".join(c for c in _UNSAFE.sub("", title) if not unicodedata.category(c).startswith("C") or c.isspace())
    return " ".join(kept.split()).strip(" .")


def chapter_stems(titles: list[str], limit: int) -> list[str]:
    """The chapters' file names without suffix: ``01 Title``..., each at most ``limit`` bytes."""
    width = max(2, len(str(len(titles))))
    return [cut(f"{i:0{width}d} {_clean(title) or 'chapter'}", limit).rstrip(" .") for i, title in enumerate(titles, 1)]


def is_leftover(name: str, finals: re.Pattern | None = None) -> bool:
    """Whether ``name`` is a temp file of a book run: tagged (``.X.book-XXXXXXXX.tmp``) with a target
    ``finals`` matches (any target if None), or an untagged one of an older version whose target
    is a chapter file (``01 Title.wav``)."""
    match = _TEMP.match(name)
    if not match:
        return False
    final = match["final"]
    if finals is not None:
        return bool(finals.fullmatch(final))
    return bool(match["tag"]) or bool(_CHAPTER_FILE.match(final))


def remove_leftovers(directory: Path, finals: re.Pattern | None = None) -> list[Path]:
    """Remove the temp files ``is_leftover`` recognises in ``directory``; the ones removed."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and is_leftover(entry.name, finals):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed
