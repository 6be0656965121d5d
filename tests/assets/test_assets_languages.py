"""G2P for the nine languages: phonemes equal hexgrad's KPipeline (or the misaki class it
uses) on fixed sentences, Words rebuild the phoneme string, language codes, chunking."""

from __future__ import annotations

import re
import warnings

import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech import (
    LanguageMismatchWarning,
    Word,
    chunk_text,
    count_tokens,
    phonemize,
    phonemize_words,
    resolve_lang,
)
from kokoro_tvm_ext.speech.g2p import join_words

pytest.importorskip("misaki")

SENTENCES = {
    "e": "El veloz murciélago hindú comía feliz cardillo y kiwi. ¿Cuántos años tienes? Tengo 25.",
    "f": "Le cœur a ses raisons que la raison ne connaît point. Il est 10 heures, n'est-ce pas ?",
    "h": "नमस्ते दुनिया, भारत एक विशाल देश है। मेरे पास 3 किताबें हैं।",
    "i": "Nel mezzo del cammin di nostra vita, mi ritrovai per una selva oscura. Ho 42 anni.",
    "p": "O rato roeu a roupa do rei de Roma. Eu tenho 7 irmãos, você sabia?",
    "z": "今天天气很好，我们去公园散步吧。我有3本书！",
    "j": "今日はいい天気ですね。東京まで3時間かかります！ちょっと待ってください、すぐ行きます。",
}
# English: KPipeline's en.G2P needs spaCy's en_core_web_sm (a download), so these are checked
# by hand against misaki's conventions (see test_assets_g2p.py); British: ɑː in "tomato", Q = əʊ.
ENGLISH = {
    ("a", "Hello world, this is a test."): "həlˈO wˈɜɹld, ðɪs ɪz ɐ tˈɛst.",
    ("b", "I say tomato."): "ˌI sˈA təmˈɑːtQ.",
}


@pytest.fixture(scope="module")
def reference():
    """Phonemes from the G2P hexgrad's KPipeline runs for each lang_code (offline here)."""
    kokoro = pytest.importorskip("kokoro")

    def run(lang: str, text: str) -> str:
        if (
            lang not in kokoro.pipeline.LANG_CODES
        ):  # an espeak-ng language beyond KPipeline's: the G2P it uses for e f h i p
            from misaki import espeak

            from kokoro_tvm_ext.speech.languages import language

            return " ".join(espeak.EspeakG2P(language=language(lang).espeak_voice)(text)[0].split())
        if lang == "j":  # KPipeline('j') builds misaki's JAG2P(), whose default reader is Cutlet;
            from misaki.cutlet import Cutlet  # misaki.ja also imports pyopenjtalk, not needed here

            return Cutlet()(text)[0]
        pipeline = kokoro.KPipeline(lang_code=lang, repo_id="hexgrad/Kokoro-82M", model=False)
        return " ".join(result.phonemes for result in pipeline(text))

    return run


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_phonemes_equal_kpipeline(reference, lang):
    text = SENTENCES[lang]
    expected = reference(lang, text)
    assert count_tokens(expected) > 20
    assert phonemize(text, lang) == expected


@pytest.mark.parametrize("lang, text", list(ENGLISH))
def test_english_phonemes(lang, text):
    assert phonemize(text, lang) == ENGLISH[(lang, text)]


ALL = {**SENTENCES, "a": "Dr. Smith paid $5.50 for 3 apples 😀 in 2023.", "b": "I say tomato, you say tomato."}


@pytest.mark.parametrize("lang", sorted(ALL))
def test_words_rebuild_the_phoneme_string(lang):
    text = ALL[lang] + "\n\n" + ALL[lang]  # two paragraphs
    words = phonemize_words(text, lang)
    assert all(isinstance(w, Word) for w in words)
    assert join_words(words).strip() == phonemize(text, lang)
    assert "  " not in join_words(words)
    spoken = [w for w in words if w.phonemes and any(c.isalpha() for c in w.phonemes)]
    assert len(spoken) >= 8
    punct = [w for w in words if w.phonemes in (".", ",", "!", "?")]
    assert punct and all(len(w.text) == 1 for w in punct)  # punctuation marks are their own Words


def test_espeak_words_are_the_written_words():
    words = phonemize_words("Hola mundo, ¿cómo estás? Tengo 1234 años.", "e")
    assert [w.text for w in words] == ["Hola", "mundo", ",", "¿", "cómo", "estás", "?", "Tengo", "1234", "años", "."]
    assert words[8].phonemes.count(" ") >= 2  # espeak reads 1234 as several words: one Word here
    french = phonemize_words("L'homme et les amis arrivent.", "fr")
    assert [w.text for w in french] == ["L'homme", "et", "les", "amis", "arrivent", "."]


def test_english_words_come_from_misaki_tokens():
    words = phonemize_words("Hello world, $5.50 please.", "a")
    assert [(w.text, w.phonemes) for w in words][:3] == [("Hello", "həlˈO"), ("world", "wˈɜɹld"), (",", ",")]
    assert ("5.50", "fˈIv dˈɑləɹz ænd fˈɪfti sˈɛnts") in [(w.text, w.phonemes) for w in words]


def test_chinese_and_japanese_words_are_their_g2p_segmentation():
    zh = phonemize_words("我们去公园。", "zh")
    assert [w.text for w in zh] == ["我们", "去", "公园", "。"]  # each word as written, its punctuation too
    ja = phonemize_words("東京まで行きます。", "ja")
    assert "".join(w.text for w in ja) == "東京まで行きます。" and len(ja) >= 3


@pytest.mark.parametrize(
    "given, code",
    [
        ("a", "a"),
        ("en-us", "a"),
        ("EN_GB", "b"),
        ("es", "e"),
        ("fr", "f"),
        ("fr-fr", "f"),
        ("hi", "h"),
        ("it", "i"),
        ("ja", "j"),
        ("pt-br", "p"),
        ("zh", "z"),
        ("Z", "z"),
    ],
)
def test_language_codes_and_aliases(given, code):
    assert resolve_lang(given) == code


def test_unknown_language_is_a_clear_error():
    with pytest.raises(InvalidInputError, match=r"unknown language 'tlh'.*known languages: a \(en-us"):
        phonemize("nuqneH.", "tlh")
    with pytest.raises(InvalidInputError, match=r"did you mean .*pt-br"):
        resolve_lang("pt_bx")


def test_text_in_another_script_warns_or_fails_clearly():
    with pytest.warns(LanguageMismatchWarning, match="no Japanese characters"):
        phonemize("Hello there.", "ja")
    with pytest.warns(LanguageMismatchWarning, match="no American English characters"):
        chunk_text("你好", lang="a")  # espeak's fallback names the characters: warned, not silent
    for lang in "abjz":
        with pytest.raises(InvalidInputError, match="nothing to pronounce in .*--lang"), warnings.catch_warnings():
            warnings.simplefilter("ignore", LanguageMismatchWarning)
            chunk_text("😀 ☃", lang=lang)


@pytest.mark.parametrize(
    "lang, sentence",
    [
        ("j", "今日はいい天気ですね。東京まで三時間かかります！本当ですか？"),
        ("z", "今天天气很好。我们去公园散步吧！你来吗？"),
    ],
)
def test_cjk_long_text_chunks_at_sentence_marks(lang, sentence):
    text = sentence * 8  # a smaller context than 510 tokens keeps the G2P work small
    chunks = chunk_text(text, lang=lang, max_tokens=100, first_chunk_tokens=None)
    assert len(chunks) == 3 * 8 and all(count_tokens(c) <= 100 for c in chunks)  # one chunk per sentence
    assert all(re.search(r"[.!?]$", c) for c in chunks)  # 。！？ are sentence ends
    assert " ".join(chunks) == phonemize(text, lang)


@pytest.mark.parametrize("lang, clause", [("j", "東京まで三時間かかります、"), ("z", "今天天气很好、")])
def test_cjk_overlong_sentence_splits_at_the_ideographic_comma(lang, clause):
    text = clause * 12 + "。"
    chunks = chunk_text(text, lang=lang, max_tokens=100, first_chunk_tokens=None)
    assert len(chunks) >= 2 and all(count_tokens(c) <= 100 for c in chunks)
    assert all(c.endswith(",") for c in chunks[:-1])  # 、 is a clause mark
    assert " ".join(chunks) == phonemize(text, lang)


def test_numbers_are_read_out_in_every_language():
    for lang, text in {
        "e": "7",
        "f": "7",
        "h": "7",
        "i": "7",
        "p": "7",
        "j": "7",
        "z": "7",
        "a": "7",
        "b": "7",
    }.items():
        ps = phonemize(text, lang)
        assert count_tokens(ps) >= 2 and not any(c.isdigit() for c in ps), (lang, ps)


def test_japanese_read_sentence_by_sentence_equals_cutlet_on_the_whole_text():
    from misaki.cutlet import Cutlet  # its default Tagger() finds unidic-lite (no full unidic installed)

    text = "「こんにちは」と彼は言った。ちょっと待って！（本当に？）はい、そうです。ええ!? 1990年に生まれました。"
    assert phonemize(text, "ja") == Cutlet()(text)[0]
