"""Text at the entry of the speech pipeline, normalized and checked once for every front end.

The text path's first step (:func:`~kokoro_tvm_ext.speech.text_path.read_text`, which ``Speaker.plan``, so ``say``,
``serve``, ``book``, Wyoming and Python, and ``phonemize`` take) passes text through :func:`clean_text` once,
before anything reads it, so no G2P library sees what it cannot read and every front end gets the same result or
the same one-line :class:`~kokoro_tvm_ext.errors.InvalidInputError`. Cleaning changes each character on its own, so
text cleaned in pieces (a Wyoming stream) is the text cleaned whole:

* a lone surrogate (what a wrong decoder leaves, e.g. Python's ``surrogateescape``) is refused with its
  position: it is not text;
* control characters other than whitespace (NUL, ESC, ...) are removed: they have no sound, and tabs,
  newlines and the other whitespace already read as spaces (blank lines as paragraph breaks);
* digits of every script (``١٢٣``, ``१२३``, fullwidth ``１２３``) become ASCII digits, which every G2P reads;
* a number of more than :data:`MAX_NUMBER_DIGITS` digits (counting the groups of ``1,000,000`` together)
  is refused: read out, 300 nines were minutes of audio, and longer ones broke the G2P libraries. Written
  with spaces between its groups it is read group by group.
"""

from __future__ import annotations

import re
import unicodedata

from kokoro_tvm_ext.support.errors import InvalidInputError

MAX_NUMBER_DIGITS = 30
# Control characters that are not whitespace (str.isspace): C0 and C1 without \t \n \v \f \r \x1c-\x1f \x85.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")
# A number: digits, groups of two or three after a separator (1,000,000 / 1.000.000 / 1,00,000 / 1 000 000
# with a no-break or thin space), then maybe decimals (3.14159); a list like 1,2,3 is several numbers.
_NUMBER = re.compile(r"\d+(?:[.,'’\u00a0\u2009\u202f]\d{2,3}(?!\d))*(?:[.,]\d+)?")


def clean_text(text: str) -> str:
    """``text`` ready for G2P: control characters removed, digits made ASCII. Raises InvalidInputError for
    a lone surrogate or a number longer than MAX_NUMBER_DIGITS digits; TypeError when it is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    bad = _SURROGATE.search(text)
    if bad:
        raise InvalidInputError(
            f"text has an invalid character at position {bad.start()}: U+{ord(bad.group()):04X}, a lone "
            "surrogate, is not Unicode text (was the input decoded with the wrong encoding?)"
        )
    text = _CONTROL.sub("", text)
    text = _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)
    for number in _NUMBER.finditer(text):
        digits = sum(c.isdigit() for c in number.group())
        if digits > MAX_NUMBER_DIGITS:
            shown = number.group() if len(number.group()) <= 16 else number.group()[:12] + "…"
            raise InvalidInputError(
                f"text has a number of {digits} digits at position {number.start()} ({shown}); numbers are read "
                f"up to {MAX_NUMBER_DIGITS} digits: write a longer one in words, or with spaces between its groups"
            )
    return text
