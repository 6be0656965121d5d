"""misaki's espeak-ng fallback for English words its lexicon lacks, without importing phonemizer.

misaki's ``EspeakFallback`` asks phonemizer's ``EspeakBackend`` for a word's IPA, then maps it to
misaki's phonemes. Importing phonemizer takes ~0.1 s of a cold ``say`` (it imports all its backends:
segments with csvw and rdflib, festival, joblib) for one call into espeak-ng. Here misaki's own
``misaki/espeak.py`` runs (its mapping unchanged) with :class:`EspeakWords` in place of that backend:
espeak-ng's library through ctypes, called and post-processed as phonemizer does for a single
utterance. A word holding one of phonemizer's punctuation marks, which phonemizer takes apart and puts
back around the pieces, goes to misaki's fallback on phonemizer itself (imported then).
"""

from __future__ import annotations

import builtins
import ctypes
import importlib.util
import re
import threading
import types
from functools import lru_cache

# phonemizer's Punctuation.default_marks(): text holding one of these is read around them
PUNCTUATION_MARKS = frozenset(';:,.!?¡¿—…"«»“”(){}[]')

_TIE = "͡"  # espeak-ng's tie between the letters of one phoneme, which misaki asks to be written as '^'
# espeak_TextToPhonemes: IPA output, ties between the letters of a phoneme (phonemizer's mode with tie=True)
_PHONEME_MODE = 0x02 | 0x01 << 7 | ord(_TIE) << 8
_UTF8 = 1
_AUDIO_OUTPUT_SYNCHRONOUS = 0x02


class _Voice(ctypes.Structure):  # the first fields of espeak_VOICE (speak_lib.h)
    _fields_ = [("name", ctypes.c_char_p), ("languages", ctypes.c_char_p), ("identifier", ctypes.c_char_p)]


class _Library:
    """One espeak-ng instance for the process (its state is global): initialized once, its voice set per
    call when it differs from the last (US and British English share it)."""

    def __init__(self, library: str, data_path: str | None) -> None:
        self.lib = ctypes.cdll.LoadLibrary(str(library))
        self.lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        self.lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        self.lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))
        self.lib.espeak_ListVoices.argtypes = [ctypes.c_void_p]
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        data = None if data_path is None else str(data_path).encode()
        if self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, 0) <= 0:
            raise RuntimeError(f"espeak-ng ({library}) failed to initialize with its data in {data_path}")
        self.voices = self._voices_by_language()
        self.voice: str | None = None

    def _voices_by_language(self) -> dict[str, bytes]:
        """Language code -> the identifier of its first voice (espeak lists the most relevant first)."""
        voices = self.lib.espeak_ListVoices(None)
        out: dict[str, bytes] = {}
        i = 0
        while voices[i]:
            voice = voices[i].contents
            language = (voice.languages or b"0").decode()[1:]  # after espeak's priority byte
            out.setdefault(language, voice.identifier)
            i += 1
        return out

    def phonemes(self, language: str, text: str) -> str:
        """espeak-ng's IPA for ``text``: each clause it returns, joined by spaces."""
        if self.voice != language:
            if language not in self.voices or self.lib.espeak_SetVoiceByName(self.voices[language]) != 0:
                raise RuntimeError(f'espeak-ng has no voice for "{language}"')
            self.voice = language
        pointer = ctypes.pointer(ctypes.c_char_p(text.encode("utf8")))
        out = []
        while pointer.contents.value is not None:
            clause = self.lib.espeak_TextToPhonemes(pointer, _UTF8, _PHONEME_MODE)
            if clause:
                out.append(clause.decode())
        return " ".join(out)


_lock = threading.Lock()


class EspeakWrapper:
    """Where misaki/espeak.py tells phonemizer's wrapper which espeak-ng to load (espeakng_loader's)."""

    library: str | None = None
    data_path: str | None = None

    @classmethod
    def set_library(cls, library: str) -> None:
        cls.library = library

    @classmethod
    def set_data_path(cls, data_path: str) -> None:
        cls.data_path = data_path


@lru_cache(maxsize=1)
def _library() -> _Library:
    return _Library(EspeakWrapper.library, EspeakWrapper.data_path)


class EspeakWords:
    """phonemizer's ``EspeakBackend(language, preserve_punctuation=True, with_stress=True, tie='^')`` for
    text without punctuation marks: ``phonemize([text])`` is its output."""

    def __init__(self, language: str, preserve_punctuation: bool, with_stress: bool, tie: str) -> None:
        if not (preserve_punctuation and with_stress and tie == "^"):
            raise ValueError("EspeakWords reads text as misaki's EspeakFallback asks only")
        self.language = language
        with _lock:
            _library()  # espeak-ng's errors here, where phonemizer raises them

    def phonemize(self, text: list[str]) -> list[str]:
        (line,) = text
        if any(c in PUNCTUATION_MARKS for c in line):
            raise ValueError("text with punctuation marks goes to phonemizer itself")
        if not line:
            return []  # phonemizer drops empty utterances
        with _lock:
            phonemes = _library().phonemes(self.language, line)
        # phonemizer's post-processing of one line: one space between words, phonemes not separated
        phonemes = phonemes.strip().replace("\n", " ").replace("  ", " ")
        phonemes = re.sub(r"_ ", " ", re.sub(r"_+", "_", phonemes))
        if not phonemes:
            return [" "]
        return ["".join(word.strip().replace(_TIE, "^") + " " for word in phonemes.split(" "))]


@lru_cache(maxsize=1)
def misaki_espeak() -> types.ModuleType:
    """misaki/espeak.py, run in a module of its own (``misaki.espeak`` itself is left as it is, on
    phonemizer, for the other languages) where its imports of phonemizer get :class:`EspeakWords`."""
    phonemizer = types.SimpleNamespace(backend=types.SimpleNamespace(EspeakBackend=EspeakWords))
    wrapper = types.SimpleNamespace(EspeakWrapper=EspeakWrapper)
    stand_ins = {"phonemizer": phonemizer, "phonemizer.backend.espeak.wrapper": wrapper}

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if name.partition(".")[0] == "phonemizer":
            return stand_ins[name]
        return builtins.__import__(name, globals, locals, fromlist, level)

    spec = importlib.util.find_spec("misaki.espeak")
    module = importlib.util.module_from_spec(spec)
    module.__builtins__ = {**vars(builtins), "__import__": import_}
    spec.loader.exec_module(module)
    return module
