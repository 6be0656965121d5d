"""How much a candidate voice pack sounds like the recordings: speech synthesized, then a speaker encoder's verdict.

A candidate speaks a few fixed test sentences through the one Speaker pipeline (the same planned chunks every
time, only their style rows change); the speaker encoder embeds each sentence. Its score is

    mean similarity to the recordings  +  CONSISTENCY x mean similarity of its sentences to one another
                                       -  OUTSIDE x (its move beyond the stock voices' region)^2

so a voice that matches on one sentence and drifts on the next, or that leaves the stock voices' region (where
Kokoro's decoder has never been and where "overfitted garbage" lives) scores lower. A recognizer's error is not in
the loop (it would triple a step's cost): bench/voice_design.py measures it on the result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kokoro_tvm_ext.speech.speaker import Voice
from kokoro_tvm_ext.speech.voices import style_for

CONSISTENCY = 0.1
OUTSIDE = 0.05

# The test sentences each candidate speaks (short: a step's cost is their synthesis), by language; EVALUATION are
# never spoken by a design (bench/voice_design.py and the tests judge the result on them).
SENTENCES = {
    "a": (
        "The quick brown fox jumps over the lazy dog.",
        "Could you tell me where the nearest station is?",
        "We finished the project two days early.",
    ),
    "b": (
        "The quick brown fox jumps over the lazy dog.",
        "Could you tell me where the nearest station is?",
        "We finished the project two days early.",
    ),
    "e": (
        "El zorro marrón salta sobre el perro.",
        "¿Dónde está la estación más cercana?",
        "Terminamos el proyecto pronto.",
    ),
    "f": (
        "Le renard brun saute par-dessus le chien.",
        "Où est la gare la plus proche ?",
        "Nous avons fini le projet tôt.",
    ),
    "h": ("आज मौसम बहुत अच्छा है।", "सबसे नज़दीकी स्टेशन कहाँ है?", "हमने काम जल्दी पूरा किया।"),
    "i": ("La volpe salta sopra il cane.", "Dov'è la stazione più vicina?", "Abbiamo finito il progetto presto."),
    "j": ("今日はとても良い天気ですね。", "一番近い駅はどこですか？", "仕事は早く終わりました。"),
    "p": ("A raposa pula sobre o cachorro.", "Onde fica a estação mais próxima?", "Terminamos o projeto cedo."),
    "z": ("今天天气很好。", "最近的车站在哪里？", "我们提前完成了工作。"),
}
# Sentences the search never speaks, on which its best candidate and the start are judged once it ends
# (search.py): a search that fits its three test sentences and no others gives back the start.
CHECK = {
    "a": (
        "My sister planted tomatoes in the garden last spring.",
        "How long does the train take to reach the city?",
        "The children laughed at the little brown puppy.",
    ),
    "e": (
        "Mi hermana plantó tomates en el jardín.",
        "¿Cuánto tarda el tren en llegar a la ciudad?",
        "Los niños se rieron del perrito.",
    ),
    "f": (
        "Ma sœur a planté des tomates au jardin.",
        "Combien de temps met le train pour arriver en ville ?",
        "Les enfants ont ri du petit chien.",
    ),
    "h": ("मेरी बहन ने बगीचे में टमाटर लगाए।", "शहर पहुँचने में ट्रेन कितना समय लेती है?", "बच्चे छोटे कुत्ते को देखकर हँसे।"),
    "i": (
        "Mia sorella ha piantato pomodori in giardino.",
        "Quanto tempo impiega il treno per arrivare in città?",
        "I bambini hanno riso del cagnolino.",
    ),
    "j": ("妹は庭にトマトを植えました。", "電車で町まで何分かかりますか？", "子供たちは小さな犬を見て笑いました。"),
    "p": (
        "Minha irmã plantou tomates no jardim.",
        "Quanto tempo o trem leva para chegar à cidade?",
        "As crianças riram do cachorrinho.",
    ),
    "z": ("我妹妹在花园里种了西红柿。", "火车到城里要多长时间？", "孩子们看着小狗笑了。"),
}
CHECK["b"] = CHECK["a"]
EVALUATION = {
    "a": (
        "A gentle breeze moved through the open window of the old library.",
        "Please remember to bring your umbrella, since it might rain later.",
        "The museum opens at nine and closes early on Sundays.",
    ),
}
EVALUATION["b"] = EVALUATION["a"]


@dataclass(frozen=True)
class Score:
    total: float
    similarity: float  # mean cosine of the sentences' embeddings with the recordings'
    consistency: float  # mean cosine of the sentences' embeddings with one another
    outside: float


def unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


class Scorer:
    """Scores packs against ``target`` (the recordings' unit embedding) on ``sentences`` (default: ``SENTENCES`` of
    ``lang``), spoken by ``speaker`` with noise seed ``seed`` and embedded by ``encoder``."""

    def __init__(self, speaker, encoder, target, lang: str, sentences=None, seed: int = 0):
        self.speaker = speaker
        self.encoder = encoder
        self.target = unit(target)
        self.lang = lang
        self.sentences = tuple(sentences or SENTENCES.get(lang, SENTENCES["a"]))
        blank = Voice.silent("design", lang)
        self.plans = [speaker.plan(text, blank, seed=seed).chunks for text in self.sentences]

    def speak(self, pack) -> list[np.ndarray]:
        """Each sentence's audio (24 kHz) in ``pack``."""
        chunks = [
            [c if c.is_pause else replace(c, style=style_for(pack, len(c.tokens))) for c in plan] for plan in self.plans
        ]
        flat = [c for plan in chunks for c in plan]
        audio = iter(a for a, _ in self.speaker.synthesize(flat))
        return [np.concatenate([next(audio) for _ in plan]).astype(np.float32) for plan in chunks]

    def embed(self, pack) -> np.ndarray:
        """[n, 256]: each sentence's unit embedding."""
        return np.stack([unit(e) for e in self.encoder.embed_many(self.speak(pack), self.speaker.sample_rate)])

    def score(self, pack, outside: float = 0.0) -> Score:
        embeddings = self.embed(pack)
        similarity = float(np.mean(embeddings @ self.target))
        n = len(embeddings)
        gram = embeddings @ embeddings.T
        consistency = float((gram.sum() - n) / (n * (n - 1))) if n > 1 else 1.0
        total = similarity + CONSISTENCY * consistency - OUTSIDE * outside**2
        return Score(total, similarity, consistency, outside)
