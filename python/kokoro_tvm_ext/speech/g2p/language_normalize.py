"""Numbers and symbols in Spanish, French, Hindi, Italian, Brazilian Portuguese, Japanese and Mandarin: tokens
their G2P (espeak-ng, Cutlet, misaki's ZHG2P) reads wrong, rewritten as words of the language it reads right.

espeak-ng drops ``‰``, reads ``$5`` "dollar five", ``3–5`` "three five", ``1.000`` "one. zero zero zero" and
``10:30`` with a colon; Cutlet leaves ``%``, ``km``, ``℃`` and ``@`` as symbols no phoneme reads; ZHG2P leaves
``°C``, ``€``, ``km`` and roman numerals. Each language's :class:`Spoken` says what its words are (``{n}`` is a
number as written, which the G2P itself reads as a number), and :func:`rules` makes one table of the engine's
(:mod:`.normalizer`) from it: the same rules for every language, the words its own. docs/pronunciation.md lists
every row with what the G2P read before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from kokoro_tvm_ext.speech.g2p.normalizer import (
    ROMAN,
    Rewritten,
    Rule,
    compile_rules,
    rewrite,
    roman_value,
    spoken_address,
)

# (one, many): the reading of 1 of it, of any other number ({n}); one template: the same for every number
Counted = tuple[str, str] | str


@dataclass(frozen=True)
class Spoken:
    """What one language's rules write. Templates take ``{n}`` (``{a}``, ``{b}``, ``{h}``, ``{m}``): numbers as
    written, for the G2P to read."""

    decimal: str  # the decimal mark as written
    grouped: str  # a whole number with thousands separators, as written: 1.000 (es), 1,00,000 (hi); "" none
    point: str | None  # the decimal mark as read: "1,5" -> "1 {point} 5"; None: the G2P reads decimals itself
    clock: Callable[[int, int], str]  # (hour, minute) -> the time as read
    to: str  # a range: "{a} a {b}"
    fraction: Callable[[int, int], str | None]  # (numerator, denominator) -> its reading, None: left as written
    digits: tuple[str, ...]  # 0-9 read one by one (phone numbers)
    digit_join: str  # between the digits of a group
    group_join: str  # between the groups
    address: dict[str, str]  # "@", ".", "/" in a URL or e-mail address
    www: str
    units: dict[str, Counted]
    currencies: dict[str, Counted]  # the symbol, before or after its number
    celsius: Counted
    fahrenheit: Counted
    degrees: Counted | None  # "90°"; None: the G2P reads it
    percent: str | None = None  # None: the G2P reads "%"
    per_mille: str | None = None
    titles: dict[str, str] = field(default_factory=dict)  # abbreviation before a name -> the word
    abbreviations: dict[str, str] = field(default_factory=dict)  # anywhere
    counting: dict[str, str] = field(default_factory=dict)  # abbreviation before a number -> the word ("pág. 10")
    numbered: str = ""  # words after which a roman numeral is a number ("chapitre IV"), a regex alternation
    regnal: bool = False  # a roman numeral after a capitalised name is read as a number: "Louis XIV" -> "Louis 14"
    extra: tuple[tuple[str, str, str, Callable], ...] = ()  # the language's own rules, tried first
    spaced: bool = True  # words are written with spaces between them (not Japanese, Mandarin)
    decimal_digits: bool = False  # the digits after the decimal mark are read one by one (Hindi, Japanese)

    def number(self, written: str) -> str:
        """A number as written (``1.000``, ``1,5``) -> as its G2P reads it: digits, the decimal mark a word."""
        whole, _, decimals = written.partition(self.decimal)
        if self.grouped and re.fullmatch(self.grouped, whole.lstrip("+-")):
            whole = re.sub(r"[^\d+-]", "", whole)
        if not decimals or self.point is None:
            return whole + (self.decimal + decimals if decimals else "")
        if self.decimal_digits:  # read one by one: 3.14 is "three point one four"
            decimals = self.digit_join.join(self.digits[int(d)] for d in decimals)
        space = " " if self.spaced else ""
        return f"{whole}{space}{self.point}{space}{decimals}"

    def counted(self, written: str, counted: Counted) -> str:
        one, many = (counted, counted) if isinstance(counted, str) else counted
        return one.format(n=written) if written.strip() == "1" else many.format(n=self.number(written))


def _number_pattern(lang: Spoken) -> str:
    """A number as written in ``lang``: 42, 1.000 (1,000 in Hindi), 1,5, -2; whole (not the tail of a digit run,
    which would make every rule starting with a number quadratic in a long one)."""
    return rf"(?<![\d.,])[+-]?(?:{lang.grouped or '(?!)'}|\d+)(?:{re.escape(lang.decimal)}\d+)?"


def _alternation(words) -> str:
    return "|".join(sorted(map(re.escape, words), key=len, reverse=True))


def _range(lang: Spoken, m: re.Match) -> str | None:
    """``3–5`` -> 3 a 5; not a score or a model number (``5-4``, ``747-400``), whose first number is not smaller."""
    return lang.to.format(a=m[1], b=m[2]) if int(m[1]) < int(m[2]) else None


def _phone(lang: Spoken, m: re.Match) -> str | None:
    """Groups of digits read digit by digit (seven digits or more; not a date, 2024-01-05)."""
    if sum(c.isdigit() for c in m[0]) < 7 or re.fullmatch(r"\d{4}-\d\d-\d\d", m[0]):
        return None
    groups = re.findall(r"\d+", m[0])
    spoken = lang.group_join.join(lang.digit_join.join(lang.digits[int(d)] for d in g) for g in groups)
    return f"+ {spoken}" if m[0].startswith("+") else spoken


def _roman(lang: Spoken, m: re.Match) -> str | None:
    return m["title"] + " " + str(roman_value(m["n"])) if ROMAN.fullmatch(m["n"]) else None


def rules(lang: Spoken) -> tuple[Rule, ...]:
    """The engine's table for ``lang``: the same rows for every language, in this order (a span rewritten by one
    row is not seen by later ones: an address before its dots are decimals, a phone number before its ranges)."""
    num = _number_pattern(lang)
    units = _alternation(lang.units)
    money = _alternation(lang.currencies)
    rows: list[tuple[str, str, str, Callable]] = [
        *lang.extra,
        (
            "e-mail",
            "@",
            r"(?<![A-Za-z0-9._+-])[A-Za-z0-9._+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?![A-Za-z0-9])",
            lambda m: _address(lang, m[0]),
        ),
        (
            "URL",
            ".",
            r"(?<![A-Za-z0-9.@-])(?:(?:https?|ftp)://)?(?:www\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
            r"\.(?:com|org|net|edu|gov|io|dev|ai|co|es|fr|it|br|in|jp|cn|de|uk|info)(?![A-Za-z0-9])"
            r"(?:/[A-Za-z0-9%-]+(?:[./][A-Za-z0-9%-]+)*)?/?",
            lambda m: _address(lang, m[0]),
        ),
        (
            "phone number",
            "0123456789",
            r"(?<![A-Za-z\d+.,-])(?:\+\d{1,3}(?:[ -]\d{2,4}){2,4}|(?:\(\d{2,3}\) ?)?\d{2,5}(?:-\d{2,4}){1,3}"
            r"|1[3-9]\d{9})(?![A-Za-z\d-])",
            lambda m: _phone(lang, m),
        ),
        (
            "clock time",
            ":",
            r"(?<![\d:.,])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])",
            lambda m: lang.clock(int(m[1]), int(m[2])),
        ),
        ("temperature", "°℃℉", rf"({num})\s?(?:°\s?C(?![A-Za-z])|℃)", lambda m: lang.counted(m[1], lang.celsius)),
        ("temperature", "°℉", rf"({num})\s?(?:°\s?F(?![A-Za-z])|℉)", lambda m: lang.counted(m[1], lang.fahrenheit)),
        ("money, symbol first", _symbol_chars(lang.currencies), rf"(?:{money})\s?({num})", lambda m: _money(lang, m)),
        (
            "money, symbol after",
            _symbol_chars(lang.currencies),
            rf"({num})\s?(?:{money})(?![A-Za-z\d])",
            lambda m: _money(lang, m),
        ),
        (
            "unit",
            "0123456789",
            rf"({num})\s?({units})(?![A-Za-z\d/'’])",
            lambda m: lang.counted(m[1], lang.units[m[2]]),
        ),
        ("fraction", "/", r"(?<![\d/.,])([1-9])/(10|[2-9])(?![\d/])", lambda m: lang.fraction(int(m[1]), int(m[2]))),
        ("fraction sign", "".join(_VULGAR), rf"[{''.join(_VULGAR)}]", lambda m: lang.fraction(*_VULGAR[m[0]])),
        (
            "range",
            "–-~〜",
            r"(?<![A-Za-z\d.,:/–-])(\d+)\s?[–~〜-]\s?(\d+)(?![A-Za-z\d.,:/–-]|[.,]\d)",
            lambda m: _range(lang, m),
        ),
    ]
    if lang.degrees:
        rows.append(("degrees", "°", rf"({num})\s?°", lambda m: lang.counted(m[1], lang.degrees)))
    if lang.percent:
        rows.append(("percent", "%％", rf"({num})\s?[%％]", lambda m: lang.percent.format(n=lang.number(m[1]))))
    if lang.per_mille:
        rows.append(("per mille", "‰", rf"({num})\s?‰", lambda m: lang.per_mille.format(n=lang.number(m[1]))))
    if lang.titles:
        titles = _alternation(lang.titles)
        rows.append(("title", "./", rf"(?<!\w)({titles})(?=\s+\w)", lambda m: lang.titles[m[1]]))
    if lang.counting:
        counting = _alternation(lang.counting)
        rows.append(
            ("abbreviation before a number", ".º°/", rf"(?<!\w)({counting})(?=\s?\d)", lambda m: lang.counting[m[1]])
        )
    if lang.abbreviations:
        rows.append(
            ("abbreviation", ".", rf"(?<!\w)({_alternation(lang.abbreviations)})", lambda m: _abbreviation(lang, m))
        )
    if lang.numbered:
        rows.append(
            (
                "roman numeral, numbered",
                "IVXLC",
                rf"\b(?P<title>{lang.numbered})\s+(?P<n>[IVXLC]+)\b",
                lambda m: _roman(lang, m),
            )
        )
    if lang.regnal:
        rows.append(
            (
                "roman numeral, regnal",
                "IVX",
                r"\b(?P<title>[A-Z][a-zà-ÿ]+)\s+(?P<n>[IVX]{2,})\b(?!['’])",
                lambda m: _roman(lang, m),
            )
        )
    if lang.grouped or lang.decimal != ".":
        rows.append(
            ("number", "0123456789", rf"(?<![A-Za-z\d.,]){num}(?![A-Za-z\d]|[.,]\d)", lambda m: lang.number(m[0]))
        )
    return compile_rules(rows)


def _symbol_chars(currencies) -> str:
    """The characters of the currency symbols that are not letters (``R$`` -> ``$``): the rule's quick test."""
    return "".join({c for symbol in currencies for c in symbol if not c.isalpha()})


def _money(lang: Spoken, m: re.Match) -> str:
    symbol = next(s for s in sorted(lang.currencies, key=len, reverse=True) if s in m[0])
    return lang.counted(m[1], lang.currencies[symbol])


def _address(lang: Spoken, text: str) -> str:
    return spoken_address(text, lang.address, lang.www, " " if lang.spaced else "")


def _abbreviation(lang: Spoken, m: re.Match) -> str:
    """The abbreviation's word, with its stop where that stop also ends the sentence (``ecc.`` last)."""
    ends = re.match(r"\s*(?:$|[A-ZÀ-Ý¿¡])", m.string[m.end() :])
    return lang.abbreviations[m[1]] + ("." if ends else "")


_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4)}


def _ordinal_fractions(one: str, names: dict[int, Counted]) -> Callable[[int, int], str | None]:
    """Fractions read as ordinals (Romance languages): 1/2 -> "un medio", 3/4 -> "3 cuartos"."""

    def fraction(numerator: int, denominator: int) -> str | None:
        if denominator not in names or not 0 < numerator < denominator:
            return None
        single, plural = names[denominator]
        return f"{one} {single}" if numerator == 1 else f"{numerator} {plural}"

    return fraction


def _clock(on_the_hour: str, minutes: str, hours: dict[int, str] | None = None) -> Callable[[int, int], str]:
    """``10:30`` -> minutes.format(h=10, m=30); ``7:00`` -> on_the_hour.format(h=7); ``hours`` the hours read
    otherwise than their number (Spanish "la una": una, not uno)."""

    def clock(hour: int, minute: int) -> str:
        h = (hours or {}).get(hour, str(hour))
        return on_the_hour.format(h=h) if minute == 0 else minutes.format(h=h, m=minute)

    return clock


def _french_ordinal(m: re.Match) -> str:
    """``2e`` -> deuxième, ``1re`` -> première, ``XXIe`` -> vingt et unième (num2words' French ordinals)."""
    from num2words import num2words

    n = int(m["n"]) if m["n"].isdigit() else roman_value(m["n"])
    if n == 1:
        return "première" if m["e"] in ("re", "ère") else "premier"
    return num2words(n, lang="fr", to="ordinal")


def _hindi_year(m: re.Match) -> str:
    """``1999 में`` -> 19 सौ 99 (उन्नीस सौ निन्यानबे): a year before 2000 is read in hundreds."""
    hundreds, rest = m[1][:2], int(m[1][2:])
    return f"{hundreds} सौ {rest}" if rest else f"{hundreds} सौ"


_ES_ORDINALS = {"1": "primer", "3": "tercer"}  # 1.er, 3.er: the short forms before a noun


def _spanish_meridiem(m: re.Match) -> str:
    """``3 p. m.`` -> 3 de la tarde, ``7:30 a. m.`` -> 7 y 30 de la mañana: the part of the day a Spanish reader
    names for that hour (RAE: "a. m." and "p. m." are written, the part of the day is said)."""
    hour, minute = int(m["h"]), int(m["m"] or 0)
    if m["ap"] in "aA":
        part = "de la noche" if hour == 12 else "de la madrugada" if hour < 6 else "de la mañana"
    else:
        part = "del mediodía" if hour == 12 else "de la tarde" if hour < 8 else "de la noche"
    stop = "." if re.match(r"\s*(?:$|[A-ZÀ-Ý¿¡])", m.string[m.end() :]) else ""  # its stop also ends the sentence
    return f"{_SPANISH_HOUR(hour, minute)} {part}{stop}"


_SPANISH_HOUR = _clock("{h}", "{h} y {m}", {1: "una"})  # before the part of the day: no "en punto"


SPANISH = Spoken(
    decimal=",",
    grouped=r"\d{1,3}(?:\.\d{3})+",
    point="coma",
    clock=_clock("{h} en punto", "{h} y {m}", {1: "una"}),
    to="{a} a {b}",
    fraction=_ordinal_fractions(
        "un",
        {
            2: ("medio", "medios"),
            3: ("tercio", "tercios"),
            4: ("cuarto", "cuartos"),
            5: ("quinto", "quintos"),
            6: ("sexto", "sextos"),
            7: ("séptimo", "séptimos"),
            8: ("octavo", "octavos"),
            9: ("noveno", "novenos"),
            10: ("décimo", "décimos"),
        },
    ),
    digits=("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"),
    digit_join=" ",
    group_join=", ",
    address={"@": "arroba", ".": "punto", "/": "barra"},
    www="uve doble uve doble uve doble",
    units={
        "km": ("un kilómetro", "{n} kilómetros"),
        "cm": ("un centímetro", "{n} centímetros"),
        "mm": ("un milímetro", "{n} milímetros"),
        "kg": ("un kilogramo", "{n} kilogramos"),
        "mg": ("un miligramo", "{n} miligramos"),
        "ml": ("un mililitro", "{n} mililitros"),
        "km/h": ("un kilómetro por hora", "{n} kilómetros por hora"),
        "GB": ("un gigabyte", "{n} gigabytes"),
        "MB": ("un megabyte", "{n} megabytes"),
    },
    currencies={
        "$": ("un dólar", "{n} dólares"),
        "€": ("un euro", "{n} euros"),
        "£": ("una libra", "{n} libras"),
        "¥": ("un yen", "{n} yenes"),
    },
    celsius=("un grado Celsius", "{n} grados Celsius"),
    fahrenheit=("un grado Fahrenheit", "{n} grados Fahrenheit"),
    degrees=None,
    per_mille="{n} por mil",
    titles={
        "Sr.": "señor",
        "Sra.": "señora",
        "Srta.": "señorita",
        "Dr.": "doctor",
        "Dra.": "doctora",
        "Ud.": "usted",
        "Uds.": "ustedes",
        "C/": "calle",
    },
    abbreviations={"p. ej.": "por ejemplo", "ej.": "ejemplo", "EE.UU.": "Estados Unidos"},
    counting={"art.": "artículo", "pág.": "página", "núm.": "número", "n.º": "número", "nº": "número"},
    extra=(
        ("ordinal", "ºª", r"\b(\d+)\.([ºª])", lambda m: m[1] + m[2]),
        ("ordinal, short", ".", r"\b([13])\.er\b", lambda m: _ES_ORDINALS[m[1]]),
        (
            "hour with a. m. or p. m.",
            "mM",
            r"(?<![\d:])(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5]\d))?\s?(?P<ap>[aApP])\.\s?[mM]\.",
            _spanish_meridiem,
        ),
    ),
)

FRENCH = Spoken(
    decimal=",",
    grouped="",  # espeak reads 1 000 itself
    point="virgule",
    clock=_clock("{h} heures", "{h} heures {m}", {0: "zéro", 1: "une"}),
    to="{a} à {b}",
    fraction=_ordinal_fractions(
        "un",
        {
            2: ("demi", "demis"),
            3: "tiers",
            4: ("quart", "quarts"),
            5: ("cinquième", "cinquièmes"),
            6: ("sixième", "sixièmes"),
            7: ("septième", "septièmes"),
            8: ("huitième", "huitièmes"),
            9: ("neuvième", "neuvièmes"),
            10: ("dixième", "dixièmes"),
        },
    ),
    digits=("zéro", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf"),
    digit_join=" ",
    group_join=", ",
    address={"@": "arobase", ".": "point", "/": "slash"},
    www="www",
    units={
        "km/h": ("un kilomètre heure", "{n} kilomètres heure"),
        "Go": ("un gigaoctet", "{n} gigaoctets"),
        "Mo": ("un mégaoctet", "{n} mégaoctets"),
    },
    currencies={
        "$": ("un dollar", "{n} dollars"),
        "€": ("un euro", "{n} euros"),
        "£": ("une livre", "{n} livres"),
        "¥": ("un yen", "{n} yens"),
    },
    celsius=("un degré Celsius", "{n} degrés Celsius"),
    fahrenheit=("un degré Fahrenheit", "{n} degrés Fahrenheit"),
    degrees=None,
    per_mille="{n} pour mille",
    titles={"M.": "Monsieur", "MM.": "Messieurs"},
    abbreviations={"p. ex.": "par exemple"},
    counting={"p.": "page", "art.": "article", "n°": "numéro", "no": "numéro"},
    numbered="[Cc]hapitre|[Tt]ome|[Ll]ivre|[Aa]cte|[Ss]cène|[Pp]artie|[Vv]olume|[Aa]rticle",
    regnal=True,
    extra=(
        (
            "clock time, h",
            "h",
            r"(?<![\w:])([01]?\d|2[0-3])\s?h\s?([0-5]\d)?(?!\w)",
            lambda m: FRENCH.clock(int(m[1]), int(m[2] or 0)),
        ),
        (
            "ordinal",
            "eè",
            r"\b(?P<n>\d+(?=e|er|re|ère|ème)|[IVXLC]{2,}(?=e|ème)|I(?=er|re|ère))(?P<e>e|er|re|ère|ème)\b",
            lambda m: _french_ordinal(m) if m["n"].isdigit() or ROMAN.fullmatch(m["n"]) else None,
        ),
    ),
)

ITALIAN = Spoken(
    decimal=",",
    grouped=r"\d{1,3}(?:\.\d{3})+",
    point="virgola",
    clock=_clock("{h} in punto", "{h} e {m}", {1: "una"}),
    to="da {a} a {b}",
    fraction=_ordinal_fractions(
        "un",
        {
            2: ("mezzo", "mezzi"),
            3: ("terzo", "terzi"),
            4: ("quarto", "quarti"),
            5: ("quinto", "quinti"),
            6: ("sesto", "sesti"),
            7: ("settimo", "settimi"),
            8: ("ottavo", "ottavi"),
            9: ("nono", "noni"),
            10: ("decimo", "decimi"),
        },
    ),
    digits=("zero", "uno", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove"),
    digit_join=" ",
    group_join=", ",
    address={"@": "chiocciola", ".": "punto", "/": "slash"},
    www="vu vu vu",
    units={
        "km": ("un chilometro", "{n} chilometri"),
        "cm": ("un centimetro", "{n} centimetri"),
        "mm": ("un millimetro", "{n} millimetri"),
        "kg": ("un chilogrammo", "{n} chilogrammi"),
        "mg": ("un milligrammo", "{n} milligrammi"),
        "ml": ("un millilitro", "{n} millilitri"),
        "km/h": ("un chilometro orario", "{n} chilometri orari"),
        "GB": ("un gigabyte", "{n} gigabyte"),
        "MB": ("un megabyte", "{n} megabyte"),
    },
    currencies={
        "$": ("un dollaro", "{n} dollari"),
        "€": ("un euro", "{n} euro"),
        "£": ("una sterlina", "{n} sterline"),
        "¥": ("uno yen", "{n} yen"),
    },
    celsius=("un grado Celsius", "{n} gradi Celsius"),
    fahrenheit=("un grado Fahrenheit", "{n} gradi Fahrenheit"),
    degrees=None,
    titles={
        "Sig.": "signor",
        "Sig.ra": "signora",
        "Sig.na": "signorina",
        "Dott.": "dottor",
        "Dott.ssa": "dottoressa",
        "Prof.": "professor",
        "Prof.ssa": "professoressa",
    },
    abbreviations={"ecc.": "eccetera", "p. es.": "per esempio"},
    counting={"art.": "articolo", "pag.": "pagina", "n.": "numero"},
)

PORTUGUESE = Spoken(
    decimal=",",
    grouped=r"\d{1,3}(?:\.\d{3})+",
    point="vírgula",
    clock=_clock("{h} horas", "{h} e {m}", {1: "uma", 2: "duas", 21: "vinte e uma", 22: "vinte e duas"}),
    to="{a} a {b}",
    fraction=_ordinal_fractions(
        "um",
        {
            2: ("meio", "meios"),
            3: ("terço", "terços"),
            4: ("quarto", "quartos"),
            5: ("quinto", "quintos"),
            6: ("sexto", "sextos"),
            7: ("sétimo", "sétimos"),
            8: ("oitavo", "oitavos"),
            9: ("nono", "nonos"),
            10: ("décimo", "décimos"),
        },
    ),
    digits=("zero", "um", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove"),
    digit_join=" ",
    group_join=", ",
    address={"@": "arroba", ".": "ponto", "/": "barra"},
    www="www",
    units={
        "km": ("um quilômetro", "{n} quilômetros"),
        "cm": ("um centímetro", "{n} centímetros"),
        "mm": ("um milímetro", "{n} milímetros"),
        "kg": ("um quilograma", "{n} quilogramas"),
        "mg": ("um miligrama", "{n} miligramas"),
        "ml": ("um mililitro", "{n} mililitros"),
        "km/h": ("um quilômetro por hora", "{n} quilômetros por hora"),
        "GB": ("um gigabyte", "{n} gigabytes"),
        "MB": ("um megabyte", "{n} megabytes"),
    },
    currencies={
        "R$": ("um real", "{n} reais"),
        "$": ("um dólar", "{n} dólares"),
        "€": ("um euro", "{n} euros"),
        "£": ("uma libra", "{n} libras"),
        "¥": ("um iene", "{n} ienes"),
    },
    celsius=("um grau Celsius", "{n} graus Celsius"),
    fahrenheit=("um grau Fahrenheit", "{n} graus Fahrenheit"),
    degrees=None,
    per_mille="{n} por mil",
    titles={"Sr.": "senhor", "Sra.": "senhora", "Srta.": "senhorita", "Dr.": "doutor", "Dra.": "doutora"},
    abbreviations={"p. ex.": "por exemplo"},
    counting={"art.": "artigo", "pág.": "página", "nº": "número", "n.º": "número"},
    extra=(
        (
            "clock time, h",
            "h",
            r"(?<![\w:])([01]?\d|2[0-3])h([0-5]\d)(?!\w)",
            lambda m: PORTUGUESE.clock(int(m[1]), int(m[2])),
        ),
    ),
)

_HINDI_FRACTIONS = {(1, 2): "आधा", (1, 4): "एक चौथाई", (3, 4): "तीन चौथाई", (1, 3): "एक तिहाई", (2, 3): "दो तिहाई"}

HINDI = Spoken(
    decimal=".",
    grouped=r"\d{1,3}(?:,\d\d)*,\d{3}",
    point="दशमलव",
    decimal_digits=True,
    clock=_clock("{h} बजे", "{h} बजकर {m} मिनट"),
    to="{a} से {b}",
    fraction=lambda n, d: _HINDI_FRACTIONS.get((n, d)),
    digits=("शून्य", "एक", "दो", "तीन", "चार", "पाँच", "छह", "सात", "आठ", "नौ"),
    digit_join=" ",
    group_join=", ",
    address={"@": "एट", ".": "डॉट", "/": "स्लैश"},
    www="www",
    units={
        "km": "{n} किलोमीटर",
        "cm": "{n} सेंटीमीटर",
        "mm": "{n} मिलीमीटर",
        "kg": "{n} किलोग्राम",
        "mg": "{n} मिलीग्राम",
        "ml": "{n} मिलीलीटर",
        "km/h": "{n} किलोमीटर प्रति घंटा",
        "GB": "{n} गीगाबाइट",
        "MB": "{n} मेगाबाइट",
    },
    currencies={
        "₹": ("एक रुपया", "{n} रुपये"),
        "$": "{n} डॉलर",
        "€": "{n} यूरो",
        "£": "{n} पाउंड",
        "¥": "{n} येन",
    },
    celsius="{n} डिग्री सेल्सियस",
    fahrenheit="{n} डिग्री फ़ारेनहाइट",
    degrees="{n} डिग्री",
    per_mille="{n} प्रति हज़ार",
    titles={"डॉ.": "डॉक्टर"},
    numbered="अध्याय|भाग|खंड",
    extra=(
        ("year", "0123456789", r"(?<![\d,.])(1[1-9]\d\d)(?=\s+(?:में|से|तक|का|की|के|ई\.)(?!\S))", _hindi_year),
        (  # "10:30 बजे": the clock's own बजे, not said twice
            "clock time with बजे",
            ":",
            r"(?<![\d:.,])([01]?\d|2[0-3]):([0-5]\d)\s*बजे",
            lambda m: HINDI.clock(int(m[1]), int(m[2])),
        ),
    ),
)

_CJK = r"[\u3040-\u30ff\u3400-\u9fff]"
# 第IV章: a roman numeral between Han or kana is a number.
_CJK_ROMAN = (
    "roman numeral",
    "IVX",
    rf"(?<={_CJK})([IVX]+)(?={_CJK})",
    lambda m: str(roman_value(m[1])) if ROMAN.fullmatch(m[1]) else None,
)
# The Latin letters' names in katakana: Cutlet leaves Latin letters as they are, which no Kokoro phoneme reads.
_JAPANESE_LETTERS = dict(
    zip(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "エー ビー シー ディー イー エフ ジー エイチ アイ ジェー ケー エル エム エヌ オー ピー キュー アール エス "
        "ティー ユー ブイ ダブリュー エックス ワイ ゼット".split(),
    )
)

JAPANESE = Spoken(
    decimal=".",
    grouped=r"\d{1,3}(?:,\d{3})+",
    point="点",
    decimal_digits=True,
    clock=_clock("{h}時", "{h}時{m}分"),
    to="{a}から{b}",
    fraction=lambda n, d: f"{d}分の{n}" if 0 < n < d else None,
    digits=("ぜろ", "いち", "に", "さん", "よん", "ご", "ろく", "なな", "はち", "きゅう"),
    digit_join="",
    group_join="の",
    address={"@": "アットマーク", ".": "ドット", "/": "スラッシュ"},
    www="www",
    units={
        "km": "{n}キロメートル",
        "cm": "{n}センチメートル",
        "mm": "{n}ミリメートル",
        "kg": "{n}キログラム",
        "mg": "{n}ミリグラム",
        "ml": "{n}ミリリットル",
        "km/h": "時速{n}キロメートル",
        "GB": "{n}ギガバイト",
        "MB": "{n}メガバイト",
    },
    currencies={
        "$": "{n}ドル",
        "€": "{n}ユーロ",
        "£": "{n}ポンド",
        "¥": "{n}円",
        "￥": "{n}円",
    },
    celsius="摂氏{n}度",
    fahrenheit="華氏{n}度",
    degrees="{n}度",
    percent="{n}パーセント",
    spaced=False,
    extra=(
        _CJK_ROMAN,
        (  # NHKを, Tシャツ: the letters' names, as Japanese reads an initialism beside Japanese text (not a unit)
            "initialism",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            rf"(?<![A-Za-z\d°])(?<![\d°] )(?:(?<={_CJK})[A-Z]{{1,6}}(?![A-Za-z])|[A-Z]{{1,6}}(?={_CJK}))",
            lambda m: "".join(_JAPANESE_LETTERS[c] for c in m[0]),
        ),
    ),
)

MANDARIN = Spoken(
    decimal=".",
    grouped=r"\d{1,3}(?:,\d{3})+",
    point=None,  # cn2an reads 3.14 as 三点一四
    clock=lambda h, m: f"{h}点" if m == 0 else f"{h}点{'零' if m < 10 else ''}{m}分",
    to="{a}到{b}",
    fraction=lambda n, d: f"{d}分之{n}" if 0 < n < d else None,
    digits=("零", "幺", "二", "三", "四", "五", "六", "七", "八", "九"),
    digit_join="",
    group_join=" ",
    address={"@": "艾特", ".": "点", "/": "斜杠"},
    www="www",
    units={
        "km": "{n}公里",
        "cm": "{n}厘米",
        "mm": "{n}毫米",
        "kg": "{n}公斤",
        "mg": "{n}毫克",
        "ml": "{n}毫升",
        "km/h": "每小时{n}公里",
    },
    currencies={
        "$": "{n}美元",
        "€": "{n}欧元",
        "£": "{n}英镑",
        "¥": "{n}元",
        "￥": "{n}元",
    },
    celsius="{n}摄氏度",
    fahrenheit="{n}华氏度",
    degrees="{n}度",
    per_mille="千分之{n}",
    spaced=False,
    extra=(_CJK_ROMAN,),
)

SPOKEN = {"e": SPANISH, "f": FRENCH, "h": HINDI, "i": ITALIAN, "p": PORTUGUESE, "j": JAPANESE, "z": MANDARIN}


@cache
def _rules(lang: str) -> tuple[Rule, ...]:
    return rules(SPOKEN[lang])


def normalize(text: str, lang: str) -> tuple[str, list[Rewritten]]:
    """``text`` in the language ``lang`` (``e f h i p j z``) with its table applied -> (the new text, [(start,
    end, written)]) as :func:`.normalizer.rewrite` gives."""
    return rewrite(text, _rules(lang))
