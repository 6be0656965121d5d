"""The Japanese G2P without mojimoji (no aarch64 wheel, so `[speak]` leaves it out there): the jaconv stand-in
misaki's Cutlet then imports converts every character it can be given as mojimoji does (mojimoji, where it is
installed, is the reference), and Japanese reads the same either way."""

from __future__ import annotations

import subprocess
import sys
import unicodedata

import pytest

from kokoro_tvm_ext.speech.g2p.japanese import mojimoji_stand_in

mojimoji = pytest.importorskip("mojimoji", reason="mojimoji is the reference (the dev extra installs it on x86)")

# Every character of the Basic Multilingual Plane as misaki's Cutlet passes it on: NFKC-normalized.
NORMALIZED = sorted({unicodedata.normalize("NFKC", chr(c)) for c in range(0x20, 0x10000) if not 0xD800 <= c < 0xE000})


def test_the_stand_in_converts_every_normalized_character_as_mojimoji_does():
    stand_in = mojimoji_stand_in()
    differ = [
        (text, call)
        for text in NORMALIZED
        for call, want, got in (
            # the two calls misaki's Cutlet makes
            ("zen_to_han(kana=False)", mojimoji.zen_to_han(text, kana=False), stand_in.zen_to_han(text, kana=False)),
            (
                "han_to_zen(digit=False, ascii=False)",
                mojimoji.han_to_zen(text, digit=False, ascii=False),
                stand_in.han_to_zen(text, digit=False, ascii=False),
            ),
        )
        if want != got
    ]
    assert not differ, differ[:20]
    assert stand_in.zen_to_han("ＡＢＣ１２３’", kana=False) == "ABC123'"  # hand-checked: it converts at all


def test_japanese_reads_the_same_without_mojimoji():
    """A fresh interpreter where `import mojimoji` fails (as on aarch64) phonemizes a text of full-width
    letters, half-width kana, quotes and digits exactly as this one, which has mojimoji."""
    from kokoro_tvm_ext.speech.text_path import phonemize

    text = "「ＡＢＣ」は’ｶﾀｶﾅ’で書きます。電話は０３－１２３４です。"
    program = (
        "import sys; sys.modules['mojimoji'] = None\n"  # import mojimoji now raises ImportError
        "from kokoro_tvm_ext.speech.text_path import phonemize\n"
        f"print(phonemize({text!r}, 'j'))\n"
        "print(type(sys.modules['mojimoji']).__name__, getattr(sys.modules['mojimoji'], '__file__', 'stand-in'))"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    phonemes, module = result.stdout.rstrip("\n").split("\n")
    assert module == "module stand-in"
    assert phonemes == phonemize(text, "j")
