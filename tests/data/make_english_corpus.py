"""Writes english_corpus.txt beside this file: the sentences tests/speech/test_english_corpus.py reads.

Three parts, one sentence (or paragraph) per line:
1. Edgar Allan Poe's two tales in bench/data/poe-tales.txt (public domain, see bench/data/README.md),
   cut into sentences, plus each paragraph whole (long inputs);
2. sentences written for this corpus (HANDWRITTEN below);
3. sentences made from the templates below with a fixed seed: numbers, currency, dates, times,
   abbreviations, initials, quotes, hyphens, contractions, possessives, acronyms, URLs and e-mails,
   symbols, heteronyms, punctuation runs, non-ASCII letters, misaki's override syntax.

Run: python tests/data/make_english_corpus.py
"""

from __future__ import annotations

import random
import re
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

HANDWRITTEN = r"""
Hello from TVM, running Kokoro on a plain CPU.
The quick brown fox jumps over the lazy dog.
I can't believe it's already 5:30 p.m.; we'll miss the 6 o'clock train!
She said, "Don't touch that," and walked away.
He wasn't sure whether he'd've gone if they'd asked.
Y'all should've seen the look on his face when the bill came to $1,234.56.
It's the dog's bowl, not the dogs' bowls, and certainly not James's.
The boss's car was parked next to the bosses' cars.
Dr. Smith and Mrs. Jones met Mr. Brown at St. Mary's Hospital on Jan. 5th.
J. R. R. Tolkien wrote The Hobbit; C. S. Lewis wrote Narnia.
The U.S. economy grew 2.3% in Q3, according to the U.K.'s Office for National Statistics.
NASA, the FBI and the CIA all use GPUs and CPUs from various vendors.
Visit https://www.example.com/path/to/page?query=1&lang=en for details.
Send an e-mail to jane.doe@example.org or call +1 (555) 123-4567.
The temperature dropped to -5°C (23°F) overnight.
Is it 3×4=12 or 3*4 = 12? Either way, 2+2=4.
I read the book yesterday, and I will read another one tomorrow.
They lead the team with a lead pipe; the lead singer was late.
We live in a town where live music plays every night.
Please record the record in the studio.
I'd like to present you with this present.
Don't object to the object on the table.
Wind the clock before the wind picks up.
A tear rolled down her cheek as she saw the tear in her dress.
He took a bow, then tied a bow on the gift.
Close the door; we're close to the station.
Wait a minute, that's a minute detail.
The wound was wound tightly with a bandage.
They desert their posts in the desert.
The farm will produce fresh produce this year.
I refuse to take out the refuse.
She was content with the content of the report.
They permit parking only with a permit.
Our project will project the image onto the wall.
The conductor will conduct the orchestra; his conduct was exemplary.
They contract a builder to sign the contract.
The invalid claim was filed by an invalid veteran.
Let's row across the lake after our row.
He plays bass guitar and fishes for bass.
What?! You did what?!? No way!!!
Well... I suppose... maybe...
Wait -- what did you just say?
The results—surprisingly—were positive.
Pages 10–20 cover the basics.
It was a well-known, state-of-the-art, never-before-seen device.
My ten-year-old son loves his x86-64 laptop and his 4K monitor.
The café served a naïve crème brûlée to Zoë and Chloë.
Ångström units and façades were discussed at the Dvořák concert in Łódź.
Gödel, Escher, Bach is a book; Straße means street in German.
We flew from São Paulo to Zürich via Málaga and Kraków.
The jalapeño piñata was a hit at the fiesta.
His résumé listed a rôle in an über-cool startup.
COVID-19 changed how we work; mRNA vaccines helped.
The file is saved at /usr/local/bin/kokoro and C:\Program Files\Kokoro.
Use snake_case for variables and CamelCase for classes, e.g. MyClass.
Call foo.bar() and then baz[0] to see the result.
#throwback to @kokoro's first release :) <3
Henry VIII had six wives; World War II ended in 1945.
The 1990s were different from the '80s and the 2000s.
On 2024-03-15 at 14:45, the server restarted.
The meeting is on 3/15/2024 at 9 a.m. sharp.
It costs €15, £12.50 or $19.99, whichever you prefer.
The company raised $5M in seed funding and $1.2 billion later.
About 1/2 of the class and 3/4 of the staff agreed.
He finished 1st, she finished 2nd, and they finished 3rd and 4th.
The population is 7,900,000,000 and growing by 1.1% per year.
Pi is approximately 3.14159, and e is about 2.71828.
Call 911 in an emergency, or 999 in the U.K.
The year 2000 problem, Y2K, was mostly averted.
Room 101, Floor 23, Building 7B, 221B Baker Street.
Flight BA2490 departs at 06:15 and lands at 10:40.
The Boeing 747-400 and the Airbus A380 are big planes.
I bought 12 eggs, 3.5 kg of flour and 2 L of milk.
The speed limit is 65 mph, or about 105 km/h.
Her phone has 256GB of storage and 8GB RAM.
The ratio was 3:1, and the score was 21-14.
"Is it true?" she asked. "It's true," he replied.
'Tis the season to be jolly, 'twas the night before Christmas.
Rock 'n' roll will never die, said the fan.
He said 'hello' and she said 'goodbye'.
“Curly quotes” and ‘single curly quotes’ are common in books.
The sign read: "No entry -- authorized personnel only!"
(This is a parenthetical remark.) [And this is bracketed.] {Braces too.}
Items: apples; oranges; pears: all fresh.
The price is $3.50/lb, or $7.70/kg.
A/B testing showed that option B won 60/40.
And/or is often ambiguous; he/she/they is inclusive.
AT&T, Procter & Gamble and Johnson & Johnson are companies.
It's 100% true, I swear, 110% sure.
The password is P@ssw0rd!, don't tell anyone.
The tweet got 1.5K likes and 300 retweets.
The ISS orbits at about 400 km altitude.
DNA, RNA and ATP are molecules; HTML, CSS and JS are languages.
An FAQ, a URL, an HTTP request and a JSON file.
The TTS engine reads text aloud; ASR transcribes speech.
IKEA, LEGO and NATO are pronounced as words, but BBC and USA are spelled out.
OK, okay, O.K., all mean the same thing.
Mt. Everest is 8,849 m tall; Mt. Fuji is 3,776 m.
Prof. Johnson, Ph.D., teaches at M.I.T. in Cambridge, Mass.
Gen. Patton, Lt. Col. Smith and Sgt. Pepper saluted.
The Co. Ltd. Inc. LLC suffixes confuse everyone, etc.
Approx. 50 people attended, i.e. fewer than expected, vs. last year.
He lives on Elm St. near 5th Ave. in New York, NY 10001.
The vote was 5-4 in favor; the court adjourned at 4:15pm.
At 12:00 noon or 12:00 midnight, which is it?
She ran 26.2 miles in 3h 45m 12s.
The recipe calls for ½ cup sugar and ¼ tsp salt.
Temperatures ranged from 20° to 30°.
The © 2024 notice and the ™ symbol appear on the label.
Chapter IV, Section 3.2.1, paragraph (b)(ii).
See Fig. 3 and Table 2 on p. 45.
Numbers like 007, 0.5, .75 and 1e6 are tricky.
He scored 9.5/10 and she scored 10/10.
We need 2x more memory and 3x the bandwidth.
The 5G network supports 4K video and 3D games.
Version 2.0.1 fixed bug #1234 reported on GitHub.
Python 3.11 is faster than Python 2.7.
I'll be there in 5 min., maybe 10.
She's a 90s kid who loves 80s music.
The Smiths' house is bigger than the Joneses' house.
Charles's and Chris's bikes were stolen.
It's its own worst enemy, isn't it?
You're not their friend, they're your friends, there.
Who's whose? Whose is who's?
I shan't, I won't, I can't and I mustn't.
Ain't nobody got time for that.
Let's go, let us go, let's not.
I'm, you're, he's, she's, it's, we're, they're.
I've, you've, we've, they've, could've, should've, would've.
I'll, you'll, he'll, she'll, we'll, they'll.
I'd, you'd, he'd, she'd, we'd, they'd.
Isn't, aren't, wasn't, weren't, hasn't, haven't, hadn't.
Doesn't, don't, didn't, won't, wouldn't, can't, couldn't.
Mustn't, needn't, shouldn't, mightn't, oughtn't.
The naïve coöperation of the reëlected officials.
Übermensch, smörgåsbord and Ñandú are borrowed words.
Æsop's fables and Œdipus Rex are classics.
The data are in the Ølstykke and Þórshöfn archives.
Don't panic!!! It's only a test??? Really...
Hmm... umm... err... well, OK.
Ha-ha-ha, that's so funny, LOL!
Shhh! Be quiet, the baby's sleeping.
Brrr, it's cold; achoo, excuse me.
We met at 7 (a.m.) and left at 9 (p.m.), as usual (e.g. on Mondays).
He wrote "Mr." and "Dr." on the form, then 'Don't' and “Jan.” [etc.] in the margin.
(Don't!) [Can't?] {Won't.} "Shouldn't," she said.
Smile :) or frown :( or wink ;) but never :-/ at work.
It was 10a.m. or 3p.m., I can't recall; maybe 12p.m.?
I [really](+1) mean it, [Hello](-0.5) there, and [read](0.5) this [twice](-1).
The year [1984](#a#) was odd; call [911](#n#) and say [Kokoro](/kˈOkəɹO/)'s name.
[New York](/nu jˈɔɹk/) is big, [l'homme](/lɔm/) is French, and [TVM](/tˌivˌiˈɛm/)-based tools are fast.
The end.
Yes.
No!
Why?
""".strip().splitlines()

FIRST = ["Alice", "Bob", "Carol", "Dave", "Eve", "Mallory", "Zoë", "José", "Siobhan", "Nguyen", "Aoife", "Björn"]
LAST = ["Smith", "O'Brien", "McDonald", "van der Berg", "García", "Müller", "Nakamura", "Łukasiewicz", "Kowalski"]
TITLES = ["Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "Sr.", "Jr.", "Capt.", "Rev.", "Hon."]
CITIES = ["Paris", "São Paulo", "New York", "Zürich", "Reykjavík", "Kraków", "Montréal", "Tokyo", "Lagos", "Perth"]
MONTHS = "January February March April May June July August September October November December".split()
MONTHS_ABBR = "Jan. Feb. Mar. Apr. Aug. Sept. Oct. Nov. Dec.".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
ACRONYMS = ["NASA", "FBI", "CPU", "GPU", "HTTP", "TTS", "API", "SQL", "NATO", "UNESCO", "AI", "ML", "PDF", "USB", "LED"]
NOUNS = ["report", "budget", "engine", "garden", "ticket", "server", "record", "project", "present", "contract"]
HETERONYM_SENTENCES = [
    "I {v} the {n} every {d}.",
    "They {v} a {n} on {d}.",
    "Did you {v} the {n}?",
    "We will {v} it, then {v} the {n} again.",
]
HETERONYMS = ["read", "lead", "live", "record", "present", "object", "wind", "tear", "close", "refuse", "permit"]
CURRENCY = ["$", "£", "€"]
UNITS = ["cases", "units", "km", "kg", "GB"]
DEGREES = ["Ph.D.", "M.D.", "Esq.", "CEO", "Jr."]
STREETS = ["Elm St.", "Main Ave.", "Park Rd.", "Baker Street"]
GADGETS = ["3D", "4K", "mp3", "MP4", "5G", "Wi-Fi", "iPhone", "eBay"]
SYMBOLS = ["&", "%", "@", "#", "+", "=", "<", ">", "°", "©", "™", "×", "÷", "~", "^", "*", "|", "§", "¶", "•"]
PUNCT_RUNS = ["?!", "!?", "...", "!!!", "???", "?!?", "…", "--", "—", ";;", ",,", "..", "!.", "?.."]
NON_ASCII = [
    "café",
    "naïve",
    "résumé",
    "Zoë",
    "Ångström",
    "façade",
    "jalapeño",
    "Dvořák",
    "Łódź",
    "Gödel",
    "Straße",
    "Ærø",
    "fiancée",
    "doppelgänger",
    "smörgåsbord",
    "Škoda",
    "Čapek",
    "Øresund",
    "Ísland",
    "Ñoño",
]
DOMAINS = ["example.com", "kokoro.dev", "mail.example.org", "tvm.apache.org", "sub.domain.co.uk"]
OVERRIDE_WORDS = [
    ("Kokoro", "kˈOkəɹO"),
    ("TVM", "tˌivˌiˈɛm"),
    ("tomato", "təmˈɑTO"),
    ("read", "ɹˈɛd"),
    ("live", "lˈIv"),
]


def _number(r: random.Random) -> str:
    kind = r.randrange(12)
    if kind == 0:
        return str(r.randrange(0, 10))
    if kind == 1:
        return str(r.randrange(10, 1000))
    if kind == 2:
        return f"{r.randrange(1000, 10**9):,}"
    if kind == 3:
        return f"{r.uniform(0, 1000):.{r.randrange(1, 4)}f}"
    if kind == 4:
        return f"-{r.randrange(1, 500)}"
    if kind == 5:
        return f"{r.randrange(1, 100)}%"
    if kind == 6:
        return f"{r.randrange(1, 10)}/{r.randrange(2, 13)}"
    if kind == 7:
        n = r.randrange(1, 120)
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"
    if kind == 8:
        return f"{r.randrange(1, 50)}-{r.randrange(50, 100)}"
    if kind == 9:
        return str(r.randrange(1900, 2100))
    if kind == 10:
        return f"{r.randrange(1, 10)}.{r.randrange(0, 10)}e{r.randrange(1, 9)}"
    return r.choice(["one", "twelve", "thirty", "a hundred", "first", "second", "tenth", "zero", "million"])


def _money(r: random.Random) -> str:
    symbol = r.choice(CURRENCY)
    kind = r.randrange(5)
    if kind == 0:
        return f"{symbol}{r.randrange(1, 100)}"
    if kind == 1:
        return f"{symbol}{r.randrange(1, 1000)}.{r.randrange(0, 100):02d}"
    if kind == 2:
        return f"{symbol}{r.randrange(1000, 10**7):,}"
    if kind == 3:
        return f"{symbol}{r.randrange(1, 99)}{r.choice(['M', 'K', 'B', 'bn', 'm'])}"
    return f"{symbol}{r.randrange(1, 20)}.{r.randrange(1, 9)} {r.choice(['million', 'billion', 'thousand'])}"


def _date(r: random.Random) -> str:
    y, m, d = r.randrange(1800, 2100), r.randrange(1, 13), r.randrange(1, 29)
    return r.choice(
        [
            f"{MONTHS[m - 1]} {d}, {y}",
            f"{d} {MONTHS[m - 1]} {y}",
            f"{m}/{d}/{y}",
            f"{d}.{m}.{y}",
            f"{y}-{m:02d}-{d:02d}",
            f"{r.choice(MONTHS_ABBR)} {d}",
            f"{r.choice(DAYS)}, {MONTHS[m - 1]} {d}",
            f"the {y // 10 * 10}s",
            f"'{r.randrange(0, 10)}0s",
            f"{MONTHS[m - 1]} {d}{'th' if d > 3 else ['st', 'nd', 'rd'][d - 1]}",
        ]
    )


def _time(r: random.Random) -> str:
    h, m = r.randrange(0, 24), r.randrange(0, 60)
    h12 = h % 12 or 12
    return r.choice(
        [
            f"{h}:{m:02d}",
            f"{h12}:{m:02d} {r.choice(['a.m.', 'p.m.', 'AM', 'PM', 'am', 'pm'])}",
            f"{h12}{r.choice(['am', 'pm', 'a.m.', 'p.m.'])}",
            f"{h:02d}:{m:02d}:{r.randrange(60):02d}",
            f"{h12} o'clock",
            f"{h:02d}{m:02d} hours",
        ]
    )


def _name(r: random.Random) -> str:
    kind = r.randrange(5)
    if kind == 0:
        return f"{r.choice(TITLES)} {r.choice(LAST)}"
    if kind == 1:
        return f"{r.choice('ABCDEFGHJKLMNPRSTW')}. {r.choice(LAST)}"
    if kind == 2:
        return f"{r.choice('ABCDEFGHJKLMNPRSTW')}. {r.choice('ABCDEFGHJKLMNPRSTW')}. {r.choice(LAST)}"
    if kind == 3:
        return f"{r.choice(FIRST)} {r.choice(LAST)}"
    return r.choice(FIRST)


def _possessive(r: random.Random) -> str:
    return r.choice([f"{r.choice(FIRST)}'s", f"{r.choice(LAST)}’s", "the dogs'", "James's", "the children's", "its"])


def _contraction(r: random.Random) -> str:
    return r.choice(
        [
            "don't",
            "won't",
            "can't",
            "I'd've",
            "y'all",
            "'tis",
            "it's",
            "we're",
            "they'll",
            "shouldn't",
            "you've",
            "he'd",
            "ain't",
            "o'clock",
            "ma'am",
            "let's",
            "gonna",
            "wanna",
            "gotta",
            "don’t",
            "it’s",
        ]
    )


def _url(r: random.Random) -> str:
    domain = r.choice(DOMAINS)
    return r.choice(
        [
            f"https://{domain}/{r.choice(['docs', 'a/b/c', 'index.html', 'search?q=tts&lang=en'])}",
            f"http://www.{domain}",
            f"www.{domain}",
            f"{domain}",
            f"{r.choice(FIRST).lower()}.{r.choice(['doe', 'smith'])}@{domain}",
            f"ftp://files.{domain}/pub/file-{r.randrange(100)}.tar.gz",
        ]
    )


def _hyphenated(r: random.Random) -> str:
    return r.choice(
        [
            "well-known",
            "state-of-the-art",
            "open-weight",
            "twenty-one",
            "long-term",
            "x86-64",
            "e-mail",
            "re-enter",
            "co-operate",
            "mother-in-law",
            "self-driving",
            "non-ASCII",
            "COVID-19",
            "T-shirt",
            "A-list",
            "up-to-date",
            "one-to-one",
            "so-called",
            "ice-cream",
            "Coca-Cola",
        ]
    )


def _quote(r: random.Random, text: str) -> str:
    return r.choice([f'"{text}"', f"“{text}”", f"'{text}'", f"‘{text}’", f"«{text}»", f'"{text},"'])


def _override(r: random.Random) -> str:
    """misaki's syntax for a word with given phonemes (what a pronunciation override becomes)."""
    word, phonemes = r.choice(OVERRIDE_WORDS)
    return f"[{word}](/{phonemes}/)"


def _clause(r: random.Random) -> str:
    makers = [
        lambda: f"{_name(r)} paid {_money(r)} on {_date(r)}",
        lambda: f"the meeting starts at {_time(r)} on {_date(r)}",
        lambda: f"about {_number(r)} people used the {r.choice(ACRONYMS)} {r.choice(NOUNS)}",
        lambda: f"{_name(r)} said {_quote(r, r.choice(['hello', 'no way', 'I know', 'see you at ' + _time(r)]))}",
        lambda: f"{_contraction(r)} forget {_possessive(r)} {r.choice(NOUNS)}",
        lambda: f"write to {_url(r)} about the {_hyphenated(r)} {r.choice(NOUNS)}",
        lambda: f"the {r.choice(NON_ASCII)} in {r.choice(CITIES)} cost {_money(r)}",
        lambda: f"{_number(r)} {r.choice(SYMBOLS)} {_number(r)}",
        lambda: (
            r.choice(HETERONYM_SENTENCES)
            .format(v=r.choice(HETERONYMS), n=r.choice(NOUNS), d=r.choice(DAYS))
            .rstrip(".?")
        ),
        lambda: f"{r.choice(ACRONYMS)} and {r.choice(ACRONYMS)} reported {_number(r)} {r.choice(UNITS)}",
        lambda: f"{_name(r)}, {r.choice(DEGREES)}, lives at {r.randrange(1, 999)} {r.choice(STREETS)}",
        lambda: f"the {_hyphenated(r)} {r.choice(NOUNS)} was {r.choice(['great', 'awful', 'fine', 'late'])}",
        lambda: (
            f"{r.choice(['e.g.', 'i.e.', 'etc.', 'vs.', 'approx.', 'cf.', 'viz.'])} {_number(r)} {r.choice(NOUNS)}s"
        ),
        lambda: f"{r.choice(FIRST)}'s {r.choice(GADGETS)} {r.choice(NOUNS)}",
        lambda: f"the {_override(r)} is {r.choice(['fun', 'here', 'fast', 'new'])}",
    ]
    return r.choice(makers)()


def _sentence(r: random.Random) -> str:
    clauses = [_clause(r) for _ in range(r.choice([1, 1, 1, 2, 2, 3, 5]))]
    joiners = [", ", "; ", " and ", " -- ", " — ", ": ", " (", ", but "]
    text = clauses[0]
    for clause in clauses[1:]:
        joiner = r.choice(joiners)
        text += joiner + clause + (")" if joiner == " (" else "")
    text = text[0].upper() + text[1:] if text[0].islower() else text
    end = r.choice([".", ".", ".", "!", "?", "", r.choice(PUNCT_RUNS), '."', ".”", ")."])
    text += end
    if r.random() < 0.05:
        text = r.choice(["  ", "\t", " "]) + text.replace(" ", r.choice(["  ", " \t", " "]), 1)
    return text


def poe() -> list[str]:
    text = (ROOT / "bench" / "data" / "poe-tales.txt").read_text(encoding="utf-8")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    sentences = []
    for paragraph in paragraphs:
        sentences += [s.strip() for s in re.findall(r".+?(?:[.!?]+[\"”’]?|$)(?:\s+|$)", paragraph) if s.strip()]
    return sentences + paragraphs


def main() -> None:
    r = random.Random(47)
    lines = poe() + HANDWRITTEN
    seen = set(lines)
    while len(lines) < 2400:
        sentence = _sentence(r)
        if sentence not in seen:
            seen.add(sentence)
            lines.append(sentence)
    (HERE / "english_corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
