"""The text path runs one way (speech/text_path.py): text -> markup -> spans -> sentences -> G2P -> chunks ->
synthesis. Each stage imports nothing after it (every import in the source, function bodies too), markup's spans
keep what they say about their text through the sentence splitter, and one plan enters markup and the sentence
splitter once, however many sentences the text has, never from the G2P."""

from __future__ import annotations

import ast
import sys
import warnings
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import kokoro_tvm_ext.speech
from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech import Speaker, Voice
from kokoro_tvm_ext.speech.markup import Override, Pause, Span, parse_spans
from kokoro_tvm_ext.speech.sentences import split_spans

SPEECH = "kokoro_tvm_ext.speech"
SPEECH_DIR = Path(kokoro_tvm_ext.speech.__file__).resolve().parent

# The stages in the order the text takes them, written once: a module (or package) may import the ones before
# its stage and its own, never one after. The package itself (its facade re-exports everything) comes last.
STAGES = (
    ("base", ("languages", "tokens", "text_checks", "cancel")),
    ("markup", ("markup",)),
    ("lexicon", ("lexicon",)),
    ("sentences", ("sentences",)),
    ("G2P", ("g2p",)),
    ("text path", ("text_path",)),
    ("chunks", ("chunks",)),
    ("synthesis", ("speaker",)),
)
FACADE = len(STAGES)


def stage_of(module: str) -> int | None:
    """The index of the stage a module of the speech package is in; FACADE for the package itself; None for a
    module outside the text path (voices, timestamps, audio, ...) or outside the package."""
    if module == SPEECH:
        return FACADE
    if not module.startswith(SPEECH + "."):
        return None
    top = module[len(SPEECH) + 1 :].split(".")[0]
    return next((i for i, (_, names) in enumerate(STAGES) if top in names), None)


def imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``source``, absolute; ``from package import name`` names the
    submodule when ``name`` is one of the stages."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                named = f"{base}.{alias.name}"
                out.append((node.lineno, named if stage_of(named) not in (None, FACADE) else base))
    return out


def backward_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import of a later stage (or the package's facade) by a module of the text path."""
    found = []
    for module, (source, is_package) in sources.items():
        here = stage_of(module)
        if here is None or here == FACADE:
            continue
        for line, target in imports(source, module, is_package):
            there = stage_of(target)
            if there is not None and there > here:
                later = STAGES[there][0] if there < FACADE else "the package facade"
                found.append(f"{module}:{line} ({STAGES[here][0]}) imports {target} ({later})")
    return found


def speech_sources() -> dict[str, tuple[str, bool]]:
    out = {}
    for path in SPEECH_DIR.rglob("*.py"):
        parts = path.relative_to(SPEECH_DIR).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join((SPEECH, *(parts[:-1] if is_package else parts)))
        out[module] = (path.read_text(encoding="utf-8"), is_package)
    return out


def test_every_stage_names_modules_that_exist():
    """A stage renamed or moved without this table would leave its imports unchecked."""
    for _, names in STAGES:
        for name in names:
            assert (SPEECH_DIR / f"{name}.py").is_file() or (SPEECH_DIR / name / "__init__.py").is_file(), name


def test_each_stage_imports_nothing_after_it():
    assert backward_imports(speech_sources()) == []


def test_markup_and_sentences_import_no_g2p_chunks_or_synthesis():
    """What issue #53 found: the sentence splitter and markup read the languages and tokens from g2p/."""
    sources = speech_sources()
    for module in (f"{SPEECH}.markup", f"{SPEECH}.sentences", f"{SPEECH}.languages", f"{SPEECH}.tokens"):
        source, is_package = sources[module]
        named = [target for _, target in imports(source, module, is_package)]
        assert not [t for t in named if t.startswith((f"{SPEECH}.g2p", f"{SPEECH}.chunks", f"{SPEECH}.speaker"))]
        assert not [t for t in named if t.startswith(("kokoro_tvm_ext.model.runtime", "tvm"))], module


@pytest.mark.parametrize(
    "module, source",
    [
        (f"{SPEECH}.sentences", "from kokoro_tvm_ext.speech.g2p.words import Word\n"),
        (f"{SPEECH}.markup", "def late():\n    from kokoro_tvm_ext.speech import sentences\n"),
        (f"{SPEECH}.g2p.espeak", "from ..chunks import Chunk\n"),
        (f"{SPEECH}.languages", "import kokoro_tvm_ext.speech\n"),
    ],
)
def test_a_backward_import_is_found(module, source):
    """The check itself: an import of a later stage, absolute, relative or inside a function, is reported."""
    assert len(backward_imports({module: (source, False)})) == 1


def test_spans_keep_their_language_through_the_sentence_splitter():
    """Sentences are cut across spans as across one text; each piece of a sentence is its span's (here its
    language, tomorrow its voice and rate), pauses stand where they were, and paragraphs are numbered."""
    spans = [
        Span(("One. Two ",), "a"),
        Pause(0.5, "[pause:0.5s]"),
        Span(("three. ", Override("Four", "fˈɔɹ"), "."), "f"),
    ]
    sentences = split_spans(spans + [Span(("\n\nFive.",), "e")], "a")
    assert [[(p.segments, p.lang) if isinstance(p, Span) else p.seconds for p in s.pieces] for s in sentences] == [
        [(("One. ",), "a")],
        [(("Two ",), "a"), 0.5, (("three. ",), "f")],  # "three" is lowercase: the sentence goes on
        [((Override("Four", "fˈɔɹ"), "."), "f")],  # the blank line after it, in span "e", says nothing
        [(("Five.",), "e")],
    ]
    assert [s.paragraph for s in sentences] == [1, 1, 1, 2]


def test_parse_spans_groups_text_and_overrides_between_pauses():
    spans = parse_spans("Hi [Kokoro](/kˈOkəɹO/)! [pause:1s][pause:200ms] Bye.", "b")
    assert spans == [
        Span(("Hi ", Override("Kokoro", "kˈOkəɹO"), "! "), "b"),
        Pause(1.0, "[pause:1s]"),
        Pause(0.2, "[pause:200ms]"),
        Span((" Bye.",), "b"),
    ]


def entries(plan_text) -> Counter:
    """Calls into markup.py and sentences.py from other files while ``plan_text()`` runs: ``module:function <-
    calling file``."""
    counts: Counter = Counter()
    stages = ("speech/markup.py", "speech/sentences.py")

    def profile(frame, event, arg):
        if event != "call":
            return
        here = frame.f_code.co_filename
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        stage = next((s for s in stages if here.endswith(s)), None)
        if stage and not caller.endswith(stage):
            counts[f"{Path(here).stem}:{frame.f_code.co_name} <- {Path(caller).parent.name}/{Path(caller).name}"] += 1

    sys.setprofile(profile)
    try:
        plan_text()
    finally:
        sys.setprofile(None)
    return counts


def test_a_plan_enters_markup_and_sentences_once_never_from_the_g2p():
    """Before #53 the G2P called markup and the sentence splitter again for every sentence: 16 calls for this
    text. Now the text path calls each stage once per text, whatever the number of sentences."""
    pytest.importorskip("misaki")
    speaker = Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))
    voice = Voice("test-a", np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), "a")
    text = "Dr. Smith met [Kokoro](/kˈOkəɹO/) today. [pause:0.5s] Then he left. What? No!\n\nChapter two\n\nThe end."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        speaker.plan(text, voice)  # the G2P loaded first
        counts = entries(lambda: speaker.plan(text, voice))
        longer = entries(lambda: speaker.plan(text + " More. And more. Still more.", voice))
    assert not [call for call in counts if "<- g2p/" in call], counts
    assert counts["markup:parse_spans <- speech/text_path.py"] == 1
    assert counts["sentences:split_spans <- speech/text_path.py"] == 1
    text_path_calls = {call: n for call, n in counts.items() if "text_path.py" in call}
    assert text_path_calls == {call: n for call, n in longer.items() if "text_path.py" in call}
