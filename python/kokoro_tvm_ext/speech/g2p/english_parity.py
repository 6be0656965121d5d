"""How often our English G2P reads a sentence exactly as KPipeline's does (misaki on spaCy's en_core_web_sm).

Both sides read the sentence after :mod:`.english_normalize` (which reads "42%", "10:30", "5 km" ... as words
on purpose, where KPipeline reads them wrong): what is compared is the tagger and everything after it.
Used by tests/speech/test_english_parity.py and the quality bench; needs the ``[dev]`` extra's tagger.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
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


# The classes of difference, most telling first: a sentence is counted once per class it shows.
CLASSES = {
    "quote": "a quotation mark faces the other way, or is read as a word's apostrophe (dropped)",
    "that": "`that`: a determiner (stressed) or a conjunction/relative",
    "in": "`in` as a particle or adverb (stressed)",
    "a": "`a`/`A` as a letter or an article",
    "stress": "only a word's stress differs (`I`, a word in a run)",
    "heteronym": "a word read otherwise by its tag (verb/noun/adjective)",
    "punctuation": "other punctuation kept, dropped or read otherwise",
    "tokens": "words glued to a mark or split otherwise (OCR debris)",
}
_QUOTES = set("“”\"'‘’")
_STRESS = re.compile("[ˈˌ]")


def _block_class(ours: list[str], theirs: list[str]) -> str:
    words = ours + theirs
    if any(set(w) & _QUOTES for w in words) or len(ours) != len(theirs) and not any(w.isalpha() for w in words):
        return "quote" if any(set(w) & _QUOTES for w in words) else "punctuation"
    bare = {_PUNCTUATION.sub("", _STRESS.sub("", w)) for w in words}
    for name, forms in (("that", {"ðæt"}), ("in", {"ɪn"}), ("a", {"ɐ", "A"})):
        if bare & forms and len(ours) == len(theirs) == 1:
            return name
    if len(ours) == len(theirs) == 1:
        if len(bare) == 1:
            return "stress"
        return "heteronym" if all(w.isalpha() for w in bare) else "punctuation"
    if not any(c.isalpha() for w in words for c in w):
        return "punctuation"
    return "tokens"


def difference_classes(difference: Difference) -> set[str]:
    """The classes (:data:`CLASSES`) of what differs in one sentence, read from the two phoneme strings word by
    word (misaki's words are separated by spaces)."""
    theirs, ours = difference.kpipeline.split(), difference.ours.split()
    matcher = difflib.SequenceMatcher(None, theirs, ours, autojunk=False)
    return {_block_class(ours[j1:j2], theirs[i1:i2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"}


def class_counts(differences: list[Difference]) -> Counter:
    """Sentences per class of difference (a sentence with two classes is in both)."""
    return Counter(c for d in differences for c in difference_classes(d))


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
