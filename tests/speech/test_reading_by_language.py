"""How numbers, symbols and abbreviations are read in Spanish, French, Hindi, Italian, Brazilian Portuguese, Japanese
and Mandarin: the table in docs/pronunciation.md.

Each row's written sentence must have the phonemes its G2P (espeak-ng, Cutlet, ZHG2P) gives the row's sentence
spelled out by hand in that language: a reference written by hand, not our own output. A rule that stops firing,
or fires on the wrong span, reads the written token the G2P's way and fails its row. The KPipeline column is
checked too: misaki's G2P called on the row as KPipeline calls it, and our G2P with the tables switched off.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

pytest.importorskip("misaki")

from kokoro_tvm_ext.speech import phonemize, phonemize_words  # noqa: E402
from kokoro_tvm_ext.speech.g2p import chinese, espeak, japanese  # noqa: E402
from kokoro_tvm_ext.speech.g2p.language_normalize import normalize  # noqa: E402
from kokoro_tvm_ext.speech.languages import BY_CODE  # noqa: E402

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "pronunciation.md"
_ROW = re.compile(
    r"^\| (?P<lang>[efhipjz]) \| (?P<case>[^|`]+) \| `(?P<written>[^`]+)` \| `(?P<spelled>[^`]+)` \| "
    r"`(?P<kpipeline>[^`]+)` \|"
)


def _table() -> list[tuple[str, str, str, str, str]]:
    section = DOC.read_text(encoding="utf-8").split("## How numbers and symbols are read in the other languages")[1]
    section = section.split("\n## ")[0]
    rows = [
        m.group("lang", "case", "written", "spelled", "kpipeline") for m in map(_ROW.match, section.splitlines()) if m
    ]
    assert len(rows) >= 100, "the table in docs/pronunciation.md lost its rows"
    return rows


ROWS = _table()
IDS = [f"{r[0]}-{r[1]}" for r in ROWS]


@pytest.fixture
def tables_off(monkeypatch):
    """The G2Ps as KPipeline calls them: no table applied."""
    for module in (espeak, japanese, chinese):
        monkeypatch.setattr(module, "normalize", lambda text, lang: (text, []))


@pytest.mark.parametrize(("lang", "case", "written", "spelled", "kpipeline"), ROWS, ids=IDS)
def test_read_as_spelled_out(lang, case, written, spelled, kpipeline):
    assert phonemize(written, lang) == phonemize(spelled, lang), case


@pytest.mark.parametrize(("lang", "case", "written", "spelled", "kpipeline"), ROWS, ids=IDS)
def test_kpipeline_column_is_the_g2p_without_the_table(tables_off, lang, case, written, spelled, kpipeline):
    before = phonemize(written, lang)
    assert before == kpipeline, case
    assert before != phonemize(spelled, lang), f"{case}: the G2P reads it right alone; no rule needed"


def _misaki(lang: str):
    """misaki's G2P for ``lang`` called on the whole text as KPipeline calls it -> its phonemes."""
    if lang == "j":
        return lambda text: japanese.cutlet()(text)[0]
    if lang == "z":
        return lambda text: chinese._g2p()(text)[0]
    return lambda text: espeak.espeak_g2p(BY_CODE[lang].espeak_voice)(text)[0]


@pytest.mark.parametrize(("lang", "case", "written", "spelled", "kpipeline"), ROWS, ids=IDS)
def test_kpipeline_column_is_misakis_own_reading(lang, case, written, spelled, kpipeline):
    assert " ".join(_misaki(lang)(written).split()) == kpipeline, case


@pytest.mark.parametrize("lang", ["e", "f", "h", "i", "p", "j", "z"])
def test_plain_text_is_left_as_written(lang):
    """Text without these tokens reads as before, byte for byte: no rule of the table fires on any line of
    bench/data/quality/ (1,890 lines: 300 Bible verses in each of a b e f h i, 30 everyday sentences in each of
    p j z), so the G2P reads the very text it read before. Every table on every language's lines: the rules key
    on digits, symbols and abbreviations, and a false hit in any text is one."""
    corpus = ROOT / "bench/data/quality"
    if not corpus.is_dir():
        pytest.skip(f"{corpus} is not in this checkout")
    lines = [line for path in sorted(corpus.glob("*.txt")) for line in path.read_text("utf-8").splitlines() if line]
    assert len(lines) >= 1500
    assert [line for line in lines if normalize(line, lang)[1]] == []


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("f", "Le Dr Martin et Ce jour-là."),  # "Le", "Ce": not the roman numerals L and C with an ordinal e
        ("e", "Ganaron 5-4 el 2024-01-05."),  # a score, a date: not a range or a phone number
        ("f", "Washington DC et Malcolm X."),  # not regnal numerals
        ("i", "Il 7/6 e il 12/25."),  # not fractions
        ("e", "Mide 3.14 metros."),  # a decimal point, not thousands
        ("z", "圆周率是3.14。"),  # cn2an reads decimals: 三点一四
    ],
)
def test_left_as_written(lang, text):
    assert normalize(text, lang)[1] == [], text


def test_tables_off_is_the_g2p_alone(tables_off):  # the fixture reaches the G2Ps: espeak drops ‰ again
    assert phonemize("Subió un 3‰.", "e") == phonemize("Subió un 3.", "e")  # espeak drops it


@pytest.mark.parametrize(
    ("lang", "text", "token", "spelled"),
    [
        ("e", "Llama al 555-0123 a las 10:30.", "555-0123", "cinco cinco cinco, cero uno dos tres"),
        ("f", "Il fait 20 °C à 10h30.", "20 °C", "vingt degrés Celsius"),
        ("j", "今日は20℃です。", "20℃", "摂氏20度"),
        ("z", "气温20°C，价格$5。", "$5", "五美元"),
    ],
)
def test_a_rewritten_token_stays_one_word_as_written(lang, text, token, spelled):
    words = phonemize_words(text, lang)
    assert token in [w.text for w in words], [w.text for w in words]
    assert next(w.phonemes for w in words if w.text == token) == phonemize(spelled, lang).rstrip(".")


@pytest.mark.parametrize("lang", ["e", "f", "h", "i", "p", "j", "z"])
def test_long_runs_are_read_in_linear_time(lang):
    """A rule that may start inside a run of digits (a unit after a number) scanned the run from every digit:
    20,000 nines took 30-56 s. Every rule starts where a run starts."""
    start = time.thread_time()
    for run in ["9" * 20000, "1-" * 5000, "a." * 5000, "1.000" * 3000, "x@" * 5000, "3–" * 5000, "9," * 5000]:
        normalize(run, lang)
    assert time.thread_time() - start < 2.0
