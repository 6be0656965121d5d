"""The search: from recordings to a voice pack (``kokoro-tvm voices design``).

1. Read and check the recordings (:mod:`.recordings`), embed them: the target.
2. Speak one test sentence in each stock voice of the pool; the ``ANCHORS`` most similar are the start.
3. Search :mod:`.space` (blend weights over the anchors + steps along the stock packs' principal directions) with
   CMA-ES (``method="cma"``, the ``cma`` package) or a random walk (``"walk"``: KVoiceWalk's method, a step from the
   best so far kept when it scores higher; the baseline the bench compares at the same budget), scoring each
   candidate by :mod:`.scoring`. The budget counts candidates (``steps``, rounded down to whole generations)
   and/or wall time (``minutes``, checked between generations); only a step budget decides the result alone:
   the same recordings, options, seed and ``steps`` give the same bytes on the same machine.
4. After every generation, save the state (:mod:`.state`).
5. At the end, judge the best candidate and the start again on ``CHECK`` sentences, which the search never spoke,
   and keep the start if it scores higher there: three test sentences can be fitted (a French voice from a pool
   without one ended below its start on unseen sentences). Choosing among the search's best few there moved
   results by less than the noise, both ways. Write the pack and its sidecar together (``save_voice``) and remove
   the state.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.model.runtime.cpu_features import host_features, int8_native
from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.speech.languages import language
from kokoro_tvm_ext.speech.speaker import Speaker
from kokoro_tvm_ext.speech.voice_design.recordings import RATE, read_recordings
from kokoro_tvm_ext.speech.voice_design.scoring import CHECK, SENTENCES, Scorer, unit
from kokoro_tvm_ext.speech.voice_design.space import ANCHORS, DIRECTIONS, StyleSpace
from kokoro_tvm_ext.speech.voice_design.state import DesignState, load_state, save_state, state_path
from kokoro_tvm_ext.speech.voices import list_voices, load_voice, save_voice
from kokoro_tvm_ext.support.cache import check_writable_file
from kokoro_tvm_ext.support.errors import InvalidInputError

METHODS = ("cma", "walk")
POPULATION = 8
SIGMA = 0.3  # the first step, in the space's units (a logit; a stock spread)
DEFAULT_MINUTES = 10.0


@dataclass(frozen=True)
class DesignOptions:
    lang: str = "a"
    seed: int = 0
    steps: int | None = None
    minutes: float | None = None
    method: str = "cma"
    population: int = POPULATION
    anchors: int = ANCHORS
    directions: int = DIRECTIONS
    pool: tuple[str, ...] | None = None  # the stock voices to start from (default: every installed one)

    def check(self) -> None:
        if self.method not in METHODS:
            raise InvalidInputError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.steps is not None and self.steps < self.population:
            raise InvalidInputError(f"--steps must be at least one generation ({self.population} candidates)")
        if self.minutes is not None and not (math.isfinite(self.minutes) and self.minutes > 0):
            raise InvalidInputError(f"--minutes must be a positive number, got {self.minutes}")
        if self.population < 2 or self.anchors < 1 or self.directions < 0:
            raise InvalidInputError("population must be at least 2, anchors at least 1, directions at least 0")

    @property
    def budget_minutes(self) -> float | None:
        return self.minutes if self.minutes is not None or self.steps is not None else DEFAULT_MINUTES


@dataclass(frozen=True)
class Design:
    path: Path
    pack: np.ndarray
    sidecar: dict
    state: DesignState


class CMA:
    """CMA-ES (the ``cma`` package) drawing its samples from its own generator, so that it pickles whole."""

    def __init__(self, size: int, seed: int, population: int):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # cma warns that matplotlib is missing (its plots)
            import cma
        self.normal = _Normal(seed)
        options = {"popsize": population, "randn": self.normal, "seed": np.nan, "verbose": -9}
        self.es = cma.CMAEvolutionStrategy(np.zeros(size), SIGMA, options)
        self.es.inject([np.zeros(size)], force=True)  # the start (the anchors' mean) is scored first: never worse

    def ask(self) -> list[np.ndarray]:
        return [np.asarray(x, np.float64) for x in self.es.ask()]

    def tell(self, xs, totals) -> None:
        self.es.tell(xs, [-t for t in totals])  # cma minimizes


class Walk:
    """A random walk that keeps a step when it scores higher (KVoiceWalk's method), ``population`` steps from the
    best at a time, each of ``SIGMA`` in every coordinate."""

    def __init__(self, size: int, seed: int, population: int):
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros(size)
        self.total = -math.inf
        self.population = population
        self.first = True

    def ask(self) -> list[np.ndarray]:
        steps = [self.x + SIGMA * self.rng.standard_normal(self.x.size) for _ in range(self.population)]
        if self.first:  # the start itself is scored first, as CMA-ES's mean is among its first samples' centre
            steps[0] = self.x.copy()
        return steps

    def tell(self, xs, totals) -> None:
        self.first = False
        i = int(np.argmax(totals))
        if totals[i] > self.total:
            self.x, self.total = np.asarray(xs[i]), float(totals[i])


class _Normal:
    """``randn(*shape)`` from a generator of its own (cma's ``randn`` option), picklable."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape):
        return self.rng.standard_normal(shape)


def default_precision() -> str:
    """int8 where the CPU computes in it (a step is a synthesis: the fastest precision), else fp32."""
    return "int8" if int8_native(host_features()) else "fp32"


def design(
    recordings,
    out,
    options: DesignOptions,
    *,
    speaker=None,
    encoder=None,
    progress=None,
    status=None,
    threads: int | None = None,
) -> Design:
    """Design a voice like ``recordings`` (paths) into ``out`` (``NAME.npy`` + ``NAME.json``), resuming from ``out``'s
    saved state when there is one. ``speaker``/``encoder``: already open ones (default: a Speaker in
    ``default_precision`` on ``threads`` and the speaker encoder); ``progress(state, generations_left_or_None)``
    after each generation; ``status(message)`` before each slow stage. Every refusal comes before anything slow
    and writes nothing."""
    options.check()
    out = Path(out).expanduser()
    if out.suffix != ".npy":
        raise InvalidInputError(f"-o {out.name}: a designed voice is written as NAME.npy (with NAME.json beside it)")
    lang = language(options.lang).code
    if not recordings:
        raise InvalidInputError("give at least one recording of the voice")
    check_writable_file(out)
    recs = read_recordings(recordings)
    pool = tuple(options.pool or [v.name for v in list_voices() if v.source != "voices-dir"])
    key = {
        "recordings": [r.sha256 for r in recs],
        "lang": lang,
        "seed": options.seed,
        "method": options.method,
        "population": options.population,
        "anchors": options.anchors,
        "directions": options.directions,
        "pool": list(pool),
        "steps": options.steps,
    }
    path = state_path(out)
    state = load_state(path, key)

    if encoder is None:
        encoder = SpeakerEncoder.load(threads=threads)
    if speaker is None:
        speaker = Speaker.open(SpeakerConfig(precision=default_precision(), threads=threads), quiet=True)
    target = unit(np.mean([unit(encoder.embed(r.audio, RATE)) for r in recs], axis=0))
    scorer = Scorer(speaker, encoder, target, lang, seed=options.seed)
    packs = {name: load_voice(name) for name in pool}
    started = time.perf_counter()
    if state is None:
        if status is not None:
            status(f"ranking {len(pool)} stock voices against the recordings (one sentence each)")
        first = scorer.plans[:1]
        stock = {}
        for name in pool:  # one sentence each: which stock voices sound nearest
            audio = _speak_first(scorer, first, packs[name])
            stock[name] = float(unit(encoder.embed(audio, speaker.sample_rate)) @ target)
        anchors = sorted(pool, key=lambda n: (-stock[n], n))[: options.anchors]
        size = len(anchors) + min(options.directions, max(len(pool) - 1, 0))
        optimizer = (CMA if options.method == "cma" else Walk)(size, options.seed, options.population)
        state = DesignState(key, stock, anchors, optimizer)
    space = StyleSpace.build([packs[n] for n in pool], [packs[n] for n in state.anchors], options.directions)

    generations = None if options.steps is None else options.steps // options.population
    if status is not None:
        where = f"generation {state.generations + 1}" if state.generations else "the start"
        status(f"searching from {where}: {' '.join(state.anchors)} ({options.method})")
    limit = options.budget_minutes
    while True:
        if generations is not None and state.generations >= generations:
            break
        if limit is not None and state.seconds + (time.perf_counter() - started) >= limit * 60:
            break
        xs = state.optimizer.ask()
        scores = [scorer.score(space.pack(x), space.outside(x)) for x in xs]
        totals = [s.total for s in scores]
        state.optimizer.tell(xs, totals)
        i = int(np.argmax(totals))
        if state.best is None or totals[i] > state.best["total"]:
            state.best_x, state.best = [float(v) for v in xs[i]], asdict(scores[i])
        state.evaluations += len(xs)
        state.generations += 1
        state.history.append((state.evaluations, state.best["total"]))
        now = time.perf_counter()
        state.seconds += now - started
        started = now
        save_state(path, state)
        if progress is not None:
            progress(state, None if generations is None else generations - state.generations)
    if state.best_x is None:
        raise InvalidInputError("the budget ended before one generation was scored; give more --minutes or --steps")

    chosen, check = _checked(scorer, space, state, lang, options.seed, status)
    x = check[chosen]["x"]
    pack = space.pack(x)
    k = len(state.anchors)
    logits = np.asarray(x[:k]) - max(x[:k])
    weights = np.exp(logits) / np.exp(logits).sum()
    sidecar = {
        "language": lang,
        "name": out.stem,
        "provenance": {
            "tool": f"kokoro-tvm-ext {_native.__version__} voices design",
            "method": options.method,
            "recordings": [
                {"file": r.path.name, "sha256": r.sha256, "speech_seconds": round(r.speech_seconds, 2)} for r in recs
            ],
            # on the check sentences, which the search never spoke; the search's best on its test sentences
            "score": {k_: round(v, 6) for k_, v in check[chosen]["score"].items()},
            "search_best": {k_: round(v, 6) for k_, v in state.best.items()},
            "kept": "start" if chosen == 0 else "search",  # the start: no candidate beat it on the check sentences
            "check": {
                "sentences": list(CHECK.get(lang, CHECK["a"])),
                "totals": [round(c["score"]["total"], 6) for c in check],  # the start's, then the search's best
            },
            "seed": options.seed,
            "budget": {
                "steps": options.steps,
                "minutes": options.budget_minutes,
                "candidates": state.evaluations,
                "generations": state.generations,
            },
            # nearest first, as the encoder ranked them (a list: the sidecar's keys are written sorted)
            "anchors": [
                {"voice": n, "similarity": round(state.stock[n], 6), "weight": round(float(w), 6)}
                for n, w in zip(state.anchors, weights)
            ],
            "directions": space.steps,
            "test_sentences": list(SENTENCES.get(lang, SENTENCES["a"])),
            "encoder": "Resemblyzer's GE2E speaker encoder (kokoro_tvm_ext.model.speaker_encoder)",
        },
    }
    save_voice(out, pack, sidecar)
    path.unlink(missing_ok=True)
    return Design(out, pack, sidecar, state)


def _checked(scorer: Scorer, space: StyleSpace, state: DesignState, lang: str, seed: int, status):
    """Index of the candidate kept and both judged on ``CHECK``: the start (x = 0), then the search's best (6
    syntheses); the start wins a tie."""
    start = [0.0] * len(state.best_x)
    xs = [start] + ([state.best_x] if state.best_x != start else [])
    if status is not None:
        status("judging the search's best and the start on sentences the search never spoke")
    sentences = CHECK.get(lang, CHECK["a"])
    check = Scorer(scorer.speaker, scorer.encoder, scorer.target, lang, sentences=sentences, seed=seed)
    judged = [{"x": x, "score": asdict(check.score(space.pack(x), space.outside(x)))} for x in xs]
    totals = [j["score"]["total"] for j in judged]
    return totals.index(max(totals)), judged


def _speak_first(scorer: Scorer, first, pack) -> np.ndarray:
    plans, scorer.plans = scorer.plans, first
    try:
        return scorer.speak(pack)[0]
    finally:
        scorer.plans = plans
