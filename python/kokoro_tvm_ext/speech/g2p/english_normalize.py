"""English text normalisation before misaki: tokens misaki reads wrong, spelled out as words it reads right.

misaki (and so KPipeline) drops or misreads some written tokens: ``42%`` loses "percent" ("%" is tagged
punctuation), ``10:30`` goes to espeak-ng, ``5 km`` is spelled "k m", ``Main St.`` is "saint". Here each such
token is rewritten as English words (``42%`` -> ``42 percent``) and misaki then reads those words and numbers
as it reads any other: no extra reader, no import. :data:`RULES` is English's table for the engine in
:mod:`.normalizer` (the other languages' tables are in :mod:`.language_normalize`), tried in order; a span
rewritten by one rule is not seen by later ones. docs/pronunciation.md lists every case with KPipeline's
reading. :func:`normalize` also says which spans it rewrote, so that the G2P can give each back its written
text (``42%`` stays one word for timings and subtitles).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kokoro_tvm_ext.speech.g2p.normalizer import ROMAN, Rule, compile_rules, rewrite, roman_value, spoken_address

# A number as written: 42, 1,000, 3.5, -2. A range of two: 3-5, 3–5, 3 - 5.
_NUM = r"[+-]?\d[\d,]*(?:\.\d+)?"
_RANGE = rf"{_NUM}(?:\s?[–-]\s?{_NUM})?"
_DASH = re.compile(r"(?<=\d)\s?[–-]\s?(?=\d)")

# a.m. or p.m.: "am" (misaki's verb) and "AM" are read as a.m., which takes the sentence's stop as written
# "a.m." does; p.m. is read right however written.
_MERIDIEM = r"[aA](?:\.[mM]\.|[mM]\b\.?)|[pP](?:\.[mM]\.|[mM]\b)"
_DIGIT = "0123456789"
_DIGITS = "oh one two three four five six seven eight nine".split()

_UNITS = {  # abbreviation after a number -> (one, many)
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "min": ("minute", "minutes"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
}
_DENOMINATORS = {
    2: ("half", "halves"),
    3: ("third", "thirds"),
    4: ("quarter", "quarters"),
    5: ("fifth", "fifths"),
    6: ("sixth", "sixths"),
    7: ("seventh", "sevenths"),
    8: ("eighth", "eighths"),
    9: ("ninth", "ninths"),
    10: ("tenth", "tenths"),
}
_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅛": (1, 8), "⅜": (3, 8)}
# Words after which a roman numeral is a number ("Chapter IV" is chapter four), "I" included.
_NUMBERED = "Chapter|Part|Book|Volume|Act|Scene|Section|Article|Appendix|Episode|Phase|Stage|Level|Round|War"
# Words before which a 4-digit number is a year, as misaki reads every 4-digit number.
_DATING = set(
    "in since by from until till to of during before after around circa c year summer winter spring autumn fall "
    "early late mid january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_NOT_COUNTED = {"is", "was", "has", "his", "as", "this", "its", "us", "always", "thus", "yes", "plus", "less"}


def _num(text: str) -> str:
    """A number or a range as misaki reads it: the dash of a range is "to"; a leading minus is "minus" (spaCy's
    tagger calls "-5" punctuation, which misaki drops)."""
    return _DASH.sub(" to ", re.sub(r"^-(?=\d)", "minus ", text.strip()))


def _many(number: str, one: str, many: str) -> str:
    return f"{_num(number)} {one if number.strip() in ('1', '+1', '-1') else many}"


def _digits(text: str) -> str:
    """Digit by digit ("oh" for 0), groups separated by commas: a phone number."""
    groups = re.findall(r"\d+", text)
    return ", ".join(" ".join(_DIGITS[int(d)] for d in g) for g in groups)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fraction(numerator: int, denominator: int) -> str | None:
    if denominator not in _DENOMINATORS or not 0 < numerator < denominator:
        return None
    one, many = _DENOMINATORS[denominator]
    return f"{numerator} {one if numerator == 1 else many}"


def _vulgar(m: re.Match) -> str | None:
    reading = _fraction(*_VULGAR[m["f"]])
    if m["whole"]:
        reading = f"{m['whole']} and {'a ' + reading[2:] if reading.startswith('1 ') else reading}"
    return reading


def _clock(m: re.Match) -> str:
    """``10:30`` -> 10 30, ``7:05`` -> 7 oh 5, ``7:00`` -> 7 o'clock (7 with a.m./p.m.)."""
    hour, minute = m["h"], m["m"]
    meridiem = m["ampm"] and _meridiem(m["ampm"])
    if minute == "00":
        time = hour if meridiem else f"{hour} o'clock"
    else:
        time = f"{hour} oh {minute[1]}" if minute[0] == "0" else f"{hour} {minute}"
    return f"{time} {meridiem}" if meridiem else time


def _hours(m: re.Match) -> str:
    """``7pm``, ``3-5 pm``, ``7 am`` -> 7 pm, 3 to 5 pm, 7 a.m."""
    return f"{_num(m['h'])} {_meridiem(m['ampm'])}"


def _meridiem(written: str) -> str:
    return "a.m." if written[0] in "aA" else written


def _spoken_address(text: str) -> str:
    """A URL or e-mail address read out: example dot com, name at example dot com."""
    return spoken_address(text, {"@": "at", ".": "dot", "/": "slash", "-": "dash", "_": "underscore"}, "w w w")


def _street(m: re.Match) -> str | None:
    """``St.`` after a name is Street, before one Saint: ``Main St.``, ``St. Louis``. Between two, a capitalised
    word that starts the sentence is no name (``Visit St. Louis``)."""
    before, after = m.string[: m.start()], m.string[m.end() :]
    name = re.search(r"[A-Z][a-z]+\s+$", before)
    capital_after = re.match(r"\s+[A-Z]", after)
    starts_sentence = name and before[: name.start()].rstrip()[-1:] in ("", ".", "!", "?", '"', "“", "‘", "'", "(")
    if name and not (starts_sentence and capital_after):
        return "Street." if capital_after or not after.strip() else "Street"  # its period also ends a sentence
    return "Saint" if capital_after else None


def _range(m: re.Match) -> str | None:
    """``3-5``, ``3–5`` -> 3 to 5; not ``747-400`` or a score (``5-4``), whose first number is not the smaller."""
    return f"{m[1]} to {m[2]}" if int(m[1]) < int(m[2]) else None


def _roman_number(m: re.Match) -> str | None:
    if not ROMAN.fullmatch(m["n"]):
        return None
    return f"{m['title']} {roman_value(m['n'])}"


def _regnal(m: re.Match) -> str | None:
    """``Henry VIII`` -> Henry the 8th: a name and a roman numeral of two letters or more (not "I")."""
    if not re.fullmatch(r"X{0,3}(?:IX|IV|V?I{0,3})", m["n"]):
        return None
    return f"{m['name']} the {_ordinal(roman_value(m['n']))}"


def _counted(m: re.Match) -> str | None:
    """``1984 apples``: a count, not a year, written as misaki reads a count (1,984). After a word that dates
    (``in 2020 things changed``, ``May 2020``) it stays a year."""
    before = re.search(r"(\w+)\W*$", m.string[: m.start()])
    if m["next"] in _NOT_COUNTED or (before and before[1].lower() in _DATING):
        return None
    return f"{m['y'][0]},{m['y'][1:]}"


# The engine's table (g2p/normalizer.py): (what, needs, pattern, reading), tried in order.
RULES: tuple[Rule, ...] = compile_rules(
    (
        ("e-mail", "@", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", lambda m: _spoken_address(m[0])),
        (
            "URL",
            ".",
            r"\b(?:(?:https?|ftp)://)?(?:www\.)?[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|dev|ai|co|uk|info)\b"
            r"(?:/[\w%-]+(?:[./][\w%-]+)*)?/?",
            lambda m: _spoken_address(m[0]),
        ),
        (
            "phone number",
            _DIGIT,
            r"(?<![\w+-])(?:\+\d{1,3}(?:[ -]\d{2,4}){2,4}|(?:\(\d{3}\) ?|\d{3}-)?\d{3}-\d{4})(?![\w-])",
            lambda m: ("plus " if m[0].startswith("+") else "") + _digits(m[0]),
        ),
        (
            "clock time",
            ":",
            r"(?<![\d:.])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?![\d:])"
            rf"(?:\s?(?P<ampm>{_MERIDIEM}))?",
            _clock,
        ),
        ("hour", "mM", rf"(?<![\d:.])(?P<h>\d{{1,2}}(?:\s?[–-]\s?\d{{1,2}})?)\s?(?P<ampm>{_MERIDIEM})", _hours),
        ("percent", "%", rf"({_RANGE})\s?%", lambda m: f"{_num(m[1])} percent"),
        ("per mille", "‰", rf"({_RANGE})\s?‰", lambda m: f"{_num(m[1])} per mille"),
        (
            "temperature",
            "°℃℉",
            rf"({_RANGE})\s?(?:°\s?([CF])\b|(℃)|(℉))",
            lambda m: _many(m[1], "degree", "degrees") + (" Celsius" if m[2] == "C" or m[3] else " Fahrenheit"),
        ),
        ("degrees", "°", rf"({_RANGE})\s?°", lambda m: _many(m[1], "degree", "degrees")),
        ("yen", "¥￥", rf"[¥￥]\s?({_RANGE})", lambda m: f"{_num(m[1])} yen"),
        ("euros after", "€", rf"({_RANGE})\s?€", lambda m: _many(m[1], "euro", "euros")),
        ("pounds after", "£", rf"({_RANGE})\s?£", lambda m: _many(m[1], "pound", "pounds")),
        ("dollars after", "$", rf"(?<![$\w])({_RANGE})\s?\$(?!\d)", lambda m: _many(m[1], "dollar", "dollars")),
        (
            "unit",
            _DIGIT,
            rf"({_RANGE})\s?({'|'.join(sorted(map(re.escape, _UNITS), key=len, reverse=True))})(?![\w/'’])",
            lambda m: _many(m[1], *_UNITS[m[2]]),
        ),
        (
            "fraction",
            "/",
            r"(?<![\d/.,])([1-9])/(10|[2-9])(?![\d/])",
            lambda m: _fraction(int(m[1]), int(m[2])),
        ),
        ("fraction sign", "".join(_VULGAR), rf"(?P<whole>\d+)?(?P<f>[{''.join(_VULGAR)}])", _vulgar),
        ("range", "-–", r"(?<![\w.,:/–-])(\d+)\s?[–-]\s?(\d+)(?![\w.,:/–-]|\.\d)", _range),
        ("count, not a year", _DIGIT, r"\b(?P<y>1[1-9]\d\d|20\d\d)\b(?= (?P<next>[a-z]+s)\b)", _counted),
        (
            "roman numeral, numbered",
            "IVXLCDM",
            rf"\b(?P<title>{_NUMBERED})\s+(?P<n>[IVXLCDM]+)\b(?!['’])",
            _roman_number,
        ),
        ("roman numeral, regnal", "IVX", r"\b(?P<name>[A-Z][a-z]+)\s+(?P<n>[IVX]{2,})\b(?!['’])", _regnal),
        ("Street, Saint", ".", r"\bSt\.", _street),
        ("number sign", ".", r"\b[Nn]o\.(?=\s?\d)", lambda m: "number"),
    )
)

_SHOUTED = re.compile(r"\b[A-Z]{2,}\b(?!['’.]?\w)")


def _unshout(text: str, is_word: Callable[[str], bool]) -> list[tuple[int, int, str]]:
    """In shouted text (two capitalised words side by side), words the lexicon knows in lower case and not in
    capitals (``THAT``, not ``NASA``, ``FBI``) are read as the words, not letter by letter."""
    capitals = list(_SHOUTED.finditer(text))
    out = []
    for i, m in enumerate(capitals):
        beside = [
            c
            for c in capitals[max(i - 1, 0) : i + 2]
            if c is not m and not text[min(c.end(), m.end()) : max(c.start(), m.start())].strip()
        ]
        if beside and is_word(m[0].lower()) and not is_word(m[0]):
            out.append((m.start(), m.end(), m[0].lower()))
    return out


def normalize(text: str, is_word: Callable[[str], bool] | None = None) -> tuple[str, list[tuple[int, int, str]]]:
    """``text`` with :data:`RULES` applied -> (the new text, [(start, end, written)]): where in the new text each
    rewritten span lies and what was written there. ``is_word``: whether the lexicon has a word as written
    (shouted words are read only with it)."""
    return rewrite(text, RULES, _unshout(text, is_word) if is_word else ())
