"""A design from a real person's recording in the public domain (John F. Kennedy, 1961, 11 s; tests/public_speech.py):
on sentences the search never spoke, the designed voice sounds more like him than the nearest stock voice does
(by the speaker encoder) and a recognizer still understands it.

A small budget and a small pool of English voices keep it to about a minute; bench/voice_design.py --recording
measures the real budget."""

from __future__ import annotations

import numpy as np
import pytest
from public_speech import JFK_SHA256

from kokoro_tvm_ext.speech.voice_design import DesignOptions, default_precision, design
from kokoro_tvm_ext.speech.voice_design.scoring import EVALUATION, unit
from kokoro_tvm_ext.speech.voices import load_voice

pytestmark = pytest.mark.model

POOL = ("am_adam", "am_michael", "am_eric", "bm_george", "bm_lewis", "af_heart")
OPTIONS = DesignOptions(lang="a", seed=3, steps=8, population=4, pool=POOL, anchors=2, directions=4)


@pytest.fixture(scope="module")
def recording():
    from public_speech import jfk_recording

    path = jfk_recording()
    if isinstance(path, str):
        pytest.skip(path)
    return path


@pytest.fixture(scope="module")
def whisper():
    pytest.importorskip("faster_whisper")
    pytest.importorskip("jiwer")
    from kokoro_harness.fidelity import transcriber

    return transcriber(threads=2)


def test_a_voice_designed_from_a_person_is_closer_to_him_than_any_stock_voice(recording, whisper, tmp_path):
    import soundfile as sf
    from kokoro_harness.fidelity import word_error_rate

    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig
    from kokoro_tvm_ext.speech.speaker import Voice

    speaker = Speaker.open(SpeakerConfig(precision=default_precision()), quiet=True)
    encoder = SpeakerEncoder.load()
    result = design([recording], tmp_path / "jfk.npy", OPTIONS, speaker=speaker, encoder=encoder)
    wav, rate = sf.read(str(recording), dtype="float32")
    him = unit(encoder.embed(wav, rate))
    nearest = max(result.state.stock, key=result.state.stock.get)

    def judged(pack) -> tuple[float, float]:
        voice = Voice("candidate", pack, "a")
        clips = [speaker.speak(text, voice, seed=0).audio for text in EVALUATION["a"]]
        similarity = float(np.mean([unit(e) @ him for e in encoder.embed_many(clips, speaker.sample_rate)]))
        wer = float(np.mean([word_error_rate(whisper(c, "en"), t) for c, t in zip(clips, EVALUATION["a"])]))
        return similarity, wer

    (ours, our_wer), (stock, stock_wer) = judged(result.pack), judged(load_voice(nearest))
    print(
        f"similarity to the recording on unseen sentences: {nearest} {stock:.4f} (WER {stock_wer:.3f}), designed "
        f"{ours:.4f} (WER {our_wer:.3f})"
    )
    assert nearest in POOL and nearest.startswith(("am_", "bm_"))  # the encoder hears a man
    assert ours > stock
    assert our_wer <= max(stock_wer, 0.1)  # as intelligible as a stock voice
    assert result.sidecar["provenance"]["recordings"][0]["sha256"] == JFK_SHA256
