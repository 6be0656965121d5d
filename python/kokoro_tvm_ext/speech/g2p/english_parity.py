"""How often our English G2P reads a sentence exactly as KPipeline's does (misaki on spaCy's en_core_web_sm).

Both sides read the sentence after :mod:`.english_normalize` (which reads "42%", "10:30", "5 km" ... as words
on purpose, where KPipeline reads them wrong): what is compared is the tagger and everything after it.
Used by tests/speech/test_english_parity.py and the quality bench; needs the ``[dev]`` extra's tagger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kokoro_tvm_ext.speech.g2p.english import english_g2p, kpipeline_g2p
from kokoro_tvm_ext.speech.g2p.english_normalize import normalize

_PUNCTUATION = re.compile(r"[^\w\sˈˌːʰʲ]+")  # misaki's punctuation marks among IPA letters and stress marks


@dataclass(frozen=True)
class Difference:
    """One sentence read two ways: KPipeline's phonemes and ours."""

    text: str
    kpipeline: str
    ours: str

    @property
    def punctuation_only(self) -> bool:
        return without_punctuation(self.kpipeline) == without_punctuation(self.ours)


def without_punctuation(phonemes: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", phonemes).split())


def parity(sentences, british: bool = False) -> tuple[int, int, list[Difference]]:
    """(sentences read alike, sentences, the differences): our English G2P against KPipeline's, each sentence
    normalised first for both. Raises MissingAssetError without the reference tagger."""
    reference, ours = kpipeline_g2p(british), english_g2p(british)
    is_word = ours.lexicon.golds.__contains__
    differences = []
    total = 0
    for sentence in sentences:
        total += 1
        text, _ = normalize(sentence, is_word)
        expected, got = reference(text)[0], ours(text)[0]
        if expected != got:
            differences.append(Difference(sentence, expected, got))
    return total - len(differences), total, differences
