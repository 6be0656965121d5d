"""The speaker encoder: ours (numpy front end, network compiled with the plugin) against PyTorch's Resemblyzer on
the same clips, medians in milliseconds.

Clips: the speaker encoder tests' Kokoro speech (1.6, 4.3 and 9.6 s at 24 kHz, resampled once to 16 kHz so both
sides get the same samples) and the three as one batch. Columns:
- partials: 1.6 s windows the clip is cut into (the network's batch);
- network: the LSTM and projection on those windows (ours: the compiled library; PyTorch: ``VoiceEncoder.forward``);
- embed: the whole embedding from a 16 kHz waveform, volume normalised, not trimmed (ours: ``embed(trim=False)``
  / ``embed_many``; PyTorch: ``embed_utterance``, its mel spectrogram by librosa, once per clip);
- max |diff|: the largest difference between the two embeddings.

Usage: python bench/speaker_encoder.py [--threads 2] [--repeat 10]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from kokoro_bench.table import machine_line, median_seconds, print_table, set_threads

CLIPS = Path(__file__).resolve().parents[1] / "tests" / "speaker_encoder" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    set_threads(args.threads)

    import numpy as np
    import soundfile
    import torch

    with warnings.catch_warnings():  # webrtcvad imports pkg_resources
        warnings.simplefilter("ignore")
        from resemblyzer import VoiceEncoder

    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder, frontend, preprocess

    torch.set_num_threads(args.threads)
    ours = SpeakerEncoder.load(threads=args.threads)
    theirs = VoiceEncoder("cpu", verbose=False)
    clips = {}
    for path in sorted(CLIPS.glob("*.flac"), key=lambda p: soundfile.info(str(p)).duration):
        wav, rate = soundfile.read(str(path), dtype="float32")
        clips[path.stem] = preprocess.normalize_volume(preprocess.resample(wav, rate))

    def row(name, wavs):
        mels = np.concatenate([frontend.partials(w) for w in wavs])
        ours_net = median_seconds(lambda: ours.embed_partials(mels), args.repeat)
        with torch.no_grad():
            batch = torch.from_numpy(mels)
            torch_net = median_seconds(lambda: theirs(batch), args.repeat)
        ours_embed = median_seconds(lambda: ours.embed_many(wavs, 16000, trim=False), args.repeat)
        torch_embed = median_seconds(lambda: [theirs.embed_utterance(w) for w in wavs], args.repeat)
        got = ours.embed_many(wavs, 16000, trim=False)
        want = np.stack([theirs.embed_utterance(w) for w in wavs])
        seconds = sum(len(w) for w in wavs) / 16000
        return [
            name,
            f"{seconds:.1f}",
            len(mels),
            f"{ours_net * 1e3:.1f}",
            f"{torch_net * 1e3:.1f}",
            f"{torch_net / ours_net:.2f}x",
            f"{ours_embed * 1e3:.1f}",
            f"{torch_embed * 1e3:.1f}",
            f"{torch_embed / ours_embed:.2f}x",
            f"{np.abs(got - want).max():.1e}",
        ]

    rows = [row(name, [wav]) for name, wav in clips.items()]
    rows.append(row("all three (one batch)", list(clips.values())))
    print(machine_line(args.threads))
    print(f"torch {torch.__version__}; medians of {args.repeat} (ms)")
    print_table(
        [
            "clip",
            "audio s",
            "partials",
            "network ours",
            "network PyTorch",
            "speed-up",
            "embed ours",
            "embed PyTorch",
            "speed-up",
            "max |diff|",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
