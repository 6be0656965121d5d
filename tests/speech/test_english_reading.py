"""How English numbers, symbols, abbreviations and quotes are read: the table in docs/pronunciation.md.

Each row's written sentence must have the phonemes misaki gives the row's hand-spelled sentence, through the
same G2P: a reference written by hand, not our own output. A rule that stops firing, or fires on the wrong
span, reads the written token misaki's way and fails its row.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("misaki")

from kokoro_tvm_ext.speech import phonemize, phonemize_words  # noqa: E402
from kokoro_tvm_ext.speech.g2p.english_normalize import normalize  # noqa: E402

DOC = Path(__file__).parents[2] / "docs" / "pronunciation.md"
_ROW = re.compile(r"^\| (?P<case>[^|`]+) \| `(?P<written>[^`]+)` \| `(?P<spelled>[^`]+)` \|")


def _table() -> list[tuple[str, str, str]]:
    section = DOC.read_text(encoding="utf-8").split("## How English numbers, symbols and abbreviations are read")[1]
    rows = [m.group("case", "written", "spelled") for m in map(_ROW.match, section.splitlines()) if m]
    assert len(rows) >= 40, "the table in docs/pronunciation.md lost its rows"
    return rows


ROWS = _table()


@pytest.mark.parametrize("lang", ["a", "b"])
@pytest.mark.parametrize(("case", "written", "spelled"), ROWS, ids=[r[0] for r in ROWS])
def test_read_as_spelled_out(case, written, spelled, lang):
    assert phonemize(written, lang) == phonemize(spelled, lang), case


def test_opening_single_quote_reads_as_double_quotes():
    for single, double in [
        ("'Hello,' she said.", '"Hello," she said.'),
        ("He said 'hello' and she said 'goodbye'.", 'He said "hello" and she said "goodbye".'),
        ("'The travelers' bags are here,' he said.", '"The travelers\' bags are here," he said.'),
    ]:
        assert phonemize(single, "a") == phonemize(double, "a"), single


def test_plural_possessive_is_no_quote():
    assert "”" not in phonemize("The Smiths' house is bigger than the Joneses' house.", "a")


def test_a_rewritten_token_stays_one_word_as_written():
    words = phonemize_words("It rose 42% by 10:30.", "a")
    texts = [w.text for w in words]
    assert "42%" in texts and "10:30" in texts, texts
    assert next(w.phonemes for w in words if w.text == "42%") == phonemize("forty two percent", "a")


def test_left_as_written():
    for text in [
        "Louis and I left.",  # the pronoun, not a numeral
        "The 747-400 won 5-4.",  # a model and a score: not ranges
        "Flight 2024-01-05 at 05:54:03.",  # a date; a time with seconds
        "Washington DC and Malcolm X.",  # not roman numerals
        "It was 7/6 of it on 12/25.",  # not fractions
        "In 1984 it was.",  # a year
        "In 2020 things changed; by May 2030 prices fall.",  # years before plural nouns
    ]:
        assert normalize(text)[1] == [], text


def test_shouting_reads_words_not_initialisms():
    golds = {"that", "said", "the", "is", "here", "NASA"}.__contains__
    text, spans = normalize("I SAID THAT NASA IS HERE", golds)
    assert text == "I said that NASA is here", spans


def test_first_clock_time_imports_no_phonemizer():
    code = (
        "import sys\n"
        "from kokoro_tvm_ext.speech import phonemize\n"
        "phonemize('Meet at 10:30, 7:05 a.m., 42%, 3\u2030, 20\u00b0C, \u00a5100, 5\u20ac, \u00bd, 555-0123, "
        "5 km, Chapter IV, St. Louis, name@example.com.', 'a')\n"
        "assert 'phonemizer' not in sys.modules, 'phonemizer imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
