"""Load-test `kokoro-tvm serve` over loopback with the official openai client: ours vs PyTorch eager.

For each backend (the compiled artifact, and the same server with ``--backend torch``,
so the comparison is the runtime, not the web stack) a server process is started;
then 1, 4 and 16 concurrent clients each send paragraphs of 1-5 sentences (seeded
choice) as streaming requests. One table: time to first audio byte p50/p95, full
response time p50/p95, audio seconds produced per wall second, the model's share of the
wall time and its RTF under that load (from the server's ``/metrics``: the sum of its chunk
synthesis times; a busy share near 100% means the model, not the web stack, sets the rate),
and the server's peak RSS (VmHWM). Then, for the first backend, RSS after 50 and after 500 short requests.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import subprocess
import sys
import threading
import time

from kokoro_harness.ports import free_port
from kokoro_harness.server import model_seconds, stop, wait_until_healthy

from kokoro_bench.table import machine_line, print_table
from kokoro_tvm_ext.model.spec import SAMPLE_RATE
from kokoro_tvm_ext.speech.config import BACKENDS

SENTENCES = [
    "Kokoro is a small text to speech model with eighty two million parameters.",
    "It runs here on a plain processor, compiled by Apache TVM.",
    "The weather today is mild, with a light breeze from the west.",
    "Please remember to water the plants before you leave.",
    "Our train leaves at half past nine, so we should hurry.",
    "Reading aloud helps children learn new words quickly.",
    "The museum opens early on weekends, and entry is free.",
    "She finished the report, sent it off, and went for a walk.",
    "A good server answers many clients at once without making anyone wait.",
    "Streaming lets the listener hear the first words while the rest is still being made.",
]
SHORT = "Thanks, that is all."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("serve benchmark")
    g.add_argument(
        "--backends",
        nargs="+",
        default=list(BACKENDS),
        choices=BACKENDS,
        help="servers to measure (default: tvm torch)",
    )
    g.add_argument("--clients", nargs="+", type=int, default=[1, 4, 16], help="concurrency levels (default: 1 4 16)")
    g.add_argument(
        "--requests", type=int, default=48, help="requests per concurrency level, at least one per client (default: 48)"
    )
    g.add_argument(
        "--format",
        default="mp3",
        choices=["mp3", "opus", "aac", "flac", "wav", "pcm"],
        help="response_format (default: mp3)",
    )
    g.add_argument(
        "--rss-requests",
        type=int,
        default=500,
        help="short requests for the RSS growth check, 0 to skip (default: 500)",
    )
    g.add_argument("--artifact", help="the server's --artifact (default: the cached one)")
    g.add_argument("--server-args", default="", help="extra arguments for `kokoro-tvm serve`, e.g. '--max-batch 1'")


def _vm(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    def __init__(self, backend: str, args):
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "kokoro_tvm_ext.cli",
            "serve",
            "--backend",
            backend,
            "--port",
            str(self.port),
            "--threads",
            str(args.threads),
            "--max-input-chars",
            "100000",
            # Every bench client comes from 127.0.0.1, and a client's next request can reach the server
            # before it has closed the previous response: at 16 clients the default limit of 16 per
            # address answered one request in 32 with 429.
            "--max-client-requests",
            str(2 * max(args.clients)),
            *args.server_args.split(),
        ]
        if args.artifact and backend == "tvm":
            cmd += ["--artifact", args.artifact]
        if args.weights:
            cmd += ["--weights", args.weights]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            wait_until_healthy(self.url, self.proc, timeout=1800)  # the first start may compile
        except RuntimeError as err:
            self.stop()
            raise RuntimeError(f"server ({backend}): {err}: {self.proc.stderr.read().decode()[-2000:]}") from None

    def peak_rss_mb(self) -> float:
        return _vm(self.proc.pid, "VmHWM")

    def rss_mb(self) -> float:
        return _vm(self.proc.pid, "VmRSS")

    def stop(self) -> None:
        stop(self.proc, timeout=30)


def _audio_seconds(data: bytes, fmt: str) -> float:
    if fmt == "pcm":
        return len(data) / 2 / SAMPLE_RATE  # 16-bit mono at the model's rate
    import av

    with av.open(io.BytesIO(data)) as c:
        frames = list(c.decode(audio=0))
    return sum(f.samples for f in frames) / frames[0].sample_rate


def _one_request(client, text: str, voice: str, fmt: str) -> tuple[float, float, bytes]:
    start = time.perf_counter()
    first = None
    parts = []
    with client.audio.speech.with_streaming_response.create(
        model="kokoro", voice=voice, input=text, response_format=fmt
    ) as response:
        for piece in response.iter_bytes():
            if piece and first is None:
                first = time.perf_counter() - start
            parts.append(piece)
    return first, time.perf_counter() - start, b"".join(parts)


def _paragraphs(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(SENTENCES, rng.randint(1, 5))) for _ in range(n)]


def load_level(url: str, clients: int, requests: int, voice: str, fmt: str, seed: int) -> dict:
    import openai

    texts = _paragraphs(requests, seed)
    lock = threading.Lock()
    results, errors = [], []

    def client_loop(k: int) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600)
        for i in range(k, requests, clients):
            try:
                results_i = _one_request(client, texts[i], voice, fmt)
            except Exception as err:  # noqa: BLE001 - counted and reported in the table
                with lock:
                    errors.append(f"{type(err).__name__}: {err}")
                continue
            with lock:
                results.append(results_i)

    start = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    audio = sum(_audio_seconds(data, fmt) for _, _, data in results)
    firsts = sorted(r[0] for r in results)
    totals = sorted(r[1] for r in results)
    return {"ok": len(results), "errors": errors, "wall": wall, "audio": audio, "firsts": firsts, "totals": totals}


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def rss_growth(url: str, server: Server, total: int, voice: str) -> tuple[float, float]:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600)
    after_50 = None
    for i in range(1, total + 1):
        client.audio.speech.create(model="kokoro", voice=voice, input=f"{SHORT} Number {i}.", response_format="mp3")
        if i == 50:
            after_50 = server.rss_mb()
            print(f"  RSS after 50: {after_50:.0f} MiB", file=sys.stderr)
    return after_50, server.rss_mb()


def run(args) -> int:
    from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

    voice = args.voice or DEFAULT_VOICE
    headers = [
        "backend",
        "clients",
        "ok",
        "first audio p50 ms",
        "p95 ms",
        "full p50 s",
        "p95 s",
        "audio s / wall s",
        "model busy %",
        "model RTF",
        "server peak RSS MiB",
    ]
    rows, rss = [], None
    for backend in args.backends:
        print(f"starting the {backend} server ...", file=sys.stderr)
        server = Server(backend, args)
        try:
            for clients in args.clients:
                n = max(args.requests, clients)  # every client sends at least one request
                busy_before, audio_before = model_seconds(server.url)
                r = load_level(server.url, clients, n, voice, args.format, seed=clients)
                busy, made = (a - b for a, b in zip(model_seconds(server.url), (busy_before, audio_before)))
                rows.append(
                    [
                        backend,
                        clients,
                        f"{r['ok']}/{n}",
                        f"{_pct(r['firsts'], 50) * 1000:.0f}",
                        f"{_pct(r['firsts'], 95) * 1000:.0f}",
                        f"{_pct(r['totals'], 50):.2f}",
                        f"{_pct(r['totals'], 95):.2f}",
                        f"{r['audio'] / r['wall']:.2f}",
                        f"{100 * busy / r['wall']:.0f}",
                        f"{busy / made:.3f}" if made else "-",
                        f"{server.peak_rss_mb():.0f}",
                    ]
                )
                print("  " + " | ".join(f"{h}: {c}" for h, c in zip(headers, rows[-1])), file=sys.stderr)
                for e in r["errors"][:3]:
                    print(f"  error: {e}", file=sys.stderr)
        finally:
            server.stop()
    if args.rss_requests >= 50:
        # A fresh server of the first backend: RSS after 50 and after N short requests.
        print(f"RSS check: {args.rss_requests} requests to a new {args.backends[0]} server", file=sys.stderr)
        server = Server(args.backends[0], args)
        try:
            rss = (args.backends[0], *rss_growth(server.url, server, args.rss_requests, voice))
        finally:
            server.stop()
    print(
        machine_line(args.threads) + f"; server and clients share the machine; format {args.format}; "
        f"load average at the end {os.getloadavg()[0]:.1f} (other processes compete for the cores)"
    )
    print_table(headers, rows)
    if rss:
        backend, a, b = rss
        print(
            f"\n{backend} server RSS after 50 requests: {a:.0f} MiB; after {args.rss_requests}: {b:.0f} MiB "
            f"({(b / a - 1) * 100:+.1f}%)"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="server threads (default: 2)")
    parser.add_argument("--voice", help="voice (default: the default voice)")
    parser.add_argument("--weights", help="a KModel .pth (default: the offline weights)")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
