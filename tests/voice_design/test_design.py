"""A short design from a held-out stock voice's own speech, on the real weights (the cached artifact in the precision
`voices design` picks): it ends closer to that voice than where it started; the same seed gives the same bytes; a run
stopped by Ctrl-C and rerun ends where an uninterrupted run ends; the sidecar says what made it.

The held-out voice (am_adam) is not among the voices the search may start from."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import soundfile as sf

from kokoro_tvm_ext.speech.voice_design import DesignOptions, default_precision, design
from kokoro_tvm_ext.speech.voice_design.scoring import CHECK, EVALUATION, SENTENCES, Scorer, unit
from kokoro_tvm_ext.speech.voice_design.search import _checked
from kokoro_tvm_ext.speech.voice_design.space import StyleSpace, style_cosine
from kokoro_tvm_ext.speech.voice_design.state import state_path
from kokoro_tvm_ext.speech.voices import load_voice

pytestmark = pytest.mark.model

HELD_OUT = "am_adam"
POOL = ("am_michael", "am_liam", "af_heart", "bm_george")
OPTIONS = DesignOptions(lang="a", seed=5, steps=8, population=4, pool=POOL, anchors=2, directions=4)
SPOKEN = "Every morning I walk along the river and watch the boats go by. The air is fresh and the water calm."


@pytest.fixture(scope="module")
def speaker():
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig

    return Speaker.open(SpeakerConfig(precision=default_precision()), quiet=True)


@pytest.fixture(scope="module")
def encoder():
    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder

    return SpeakerEncoder.load()


@pytest.fixture(scope="module")
def recording(speaker, tmp_path_factory):
    path = tmp_path_factory.mktemp("recording") / "held_out.wav"
    speech = speaker.speak(SPOKEN, HELD_OUT, seed=1)
    sf.write(path, speech.audio, speech.sample_rate, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def designed(recording, speaker, encoder, tmp_path_factory):
    out = tmp_path_factory.mktemp("first") / "voice.npy"
    return design([recording], out, OPTIONS, speaker=speaker, encoder=encoder)


def _similarity(speaker, encoder, pack, reference: np.ndarray) -> float:
    """Mean encoder similarity of ``pack`` speaking the sentences the search never spoke to ``reference``."""
    from kokoro_tvm_ext.speech.speaker import Voice

    voice = Voice("candidate", pack, "a")
    clips = [speaker.speak(text, voice, seed=0).audio for text in EVALUATION["a"]]
    return float(np.mean([unit(e) @ reference for e in encoder.embed_many(clips, speaker.sample_rate)]))


def test_a_design_ends_closer_to_the_held_out_voice(designed, speaker, encoder):
    held = load_voice(HELD_OUT)
    start = np.mean([load_voice(n) for n in designed.state.anchors], axis=0)  # x = 0: the anchors' mean
    truth = [speaker.speak(text, HELD_OUT, seed=0).audio for text in EVALUATION["a"]]
    reference = unit(np.mean([unit(e) for e in encoder.embed_many(truth, speaker.sample_rate)], axis=0))
    ours, before = (_similarity(speaker, encoder, p, reference) for p in (designed.pack, start))
    print(
        f"similarity on unseen sentences {before:.4f} -> {ours:.4f}; style cosine "
        f"{style_cosine(start, held):.4f} -> {style_cosine(designed.pack, held):.4f}"
    )
    assert designed.sidecar["provenance"]["score"]["similarity"] > 0
    assert ours > before
    assert style_cosine(designed.pack, held) > style_cosine(start, held)


def test_the_same_seed_gives_the_same_bytes(designed, recording, speaker, encoder, tmp_path):
    again = design([recording], tmp_path / "voice.npy", OPTIONS, speaker=speaker, encoder=encoder)
    assert again.path.read_bytes() == designed.path.read_bytes()
    assert again.path.with_suffix(".json").read_bytes() == designed.path.with_suffix(".json").read_bytes()


def test_a_resumed_run_ends_as_an_uninterrupted_one(designed, recording, speaker, encoder, tmp_path):
    out = tmp_path / "voice.npy"

    def interrupt(state, left):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        design([recording], out, OPTIONS, speaker=speaker, encoder=encoder, progress=interrupt)
    assert not out.exists() and not out.with_suffix(".json").exists()  # nothing half written
    assert state_path(out).is_file()
    resumed = design([recording], out, OPTIONS, speaker=speaker, encoder=encoder)
    assert resumed.state.generations == 2 and resumed.state.evaluations == 8
    assert out.read_bytes() == designed.path.read_bytes()
    assert out.with_suffix(".json").read_bytes() == designed.path.with_suffix(".json").read_bytes()
    assert not state_path(out).exists()


def test_a_state_for_other_options_is_refused_not_overwritten(recording, speaker, encoder, tmp_path):
    from kokoro_tvm_ext.support.errors import InvalidInputError

    out = tmp_path / "voice.npy"

    def interrupt(state, left):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        design([recording], out, OPTIONS, speaker=speaker, encoder=encoder, progress=interrupt)
    saved = state_path(out).read_bytes()
    other = DesignOptions(**{**OPTIONS.__dict__, "seed": 6})
    with pytest.raises(InvalidInputError, match="holds a design with other seed"):
        design([recording], out, other, speaker=speaker, encoder=encoder)
    assert state_path(out).read_bytes() == saved and not out.exists()


def test_the_sidecar_says_what_made_the_voice(designed, recording):
    meta = json.loads(designed.path.with_suffix(".json").read_text())
    assert meta["format"] == "kokoro-tvm-voice/1" and meta["language"] == "a"
    made = meta["provenance"]
    assert made["recordings"][0]["sha256"] == hashlib.sha256(recording.read_bytes()).hexdigest()
    assert made["seed"] == 5 and made["budget"]["candidates"] == 8 and made["budget"]["generations"] == 2
    anchors = made["anchors"]
    assert {a["voice"] for a in anchors} <= set(POOL) and abs(sum(a["weight"] for a in anchors) - 1) < 1e-5
    assert [a["similarity"] for a in anchors] == sorted((a["similarity"] for a in anchors), reverse=True)
    assert HELD_OUT not in {a["voice"] for a in anchors}
    assert {"total", "similarity", "consistency", "outside"} <= set(made["score"])
    # the score is the kept candidate's on the check sentences, the best of those judged there
    check = made["check"]
    assert check["sentences"] == list(CHECK["a"]) and not set(CHECK["a"]) & set(SENTENCES["a"] + EVALUATION["a"])
    assert made["score"]["total"] == max(check["totals"]) and len(check["totals"]) == 2
    assert made["kept"] == ("start" if check["totals"].index(max(check["totals"])) == 0 else "search")
    np.testing.assert_array_equal(np.load(designed.path), designed.pack)
    assert designed.pack.shape == (510, 1, 256) and designed.pack.dtype == np.float32


def test_a_candidate_only_the_test_sentences_liked_gives_the_start_back(designed, speaker, encoder):
    # A best candidate far outside the stock voices' region: on the check sentences the region term (and the
    # garbled voice) puts it below the start, which is kept.
    from dataclasses import replace

    packs = [load_voice(n) for n in POOL]
    space = StyleSpace.build(packs, [load_voice(n) for n in designed.state.anchors], OPTIONS.directions)
    far = [0.0] * len(designed.state.best_x)
    far[-1] = far[-2] = 8.0  # eight spreads along two principal directions
    state = replace(designed.state, best_x=far)
    scorer = Scorer(speaker, encoder, np.ones(256), "a", seed=OPTIONS.seed)
    kept, judged = _checked(scorer, space, state, "a", OPTIONS.seed, None)
    assert [j["x"] for j in judged] == [[0.0] * len(far), far]
    assert kept == 0 and judged[0]["score"]["total"] > judged[1]["score"]["total"]
