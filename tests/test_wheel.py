"""The release artifacts of scripts/build-wheels.sh: a wheel a package index accepts, and an sdist.

The wheel must carry an abi3 manylinux tag (manylinux_2_28 or older) that PyPI's
auditwheel agrees with, except for libtvm_ffi.so, which the apache-tvm-ffi wheel
provides (a copy of our own would be a second FFI registry). It must install into
a bare virtualenv (no cargo, no compiler, no LD_LIBRARY_PATH: PATH is the venv's
bin/ only) with nothing but its runtime dependencies, and with its ``speak`` extra
(still no torch) `kokoro-tvm say` there must speak text from a compiled artifact
as PyTorch does; with the companion wheel of prebuilt libraries it must speak from
an empty cache (the default weights rebuilt with numpy and onnx, bound to the
prebuilt library), and without it say in one line what to install. The sdist must
build from source with cargo present.

The companion wheel is built here from the session's ``small_artifact`` (compiled for
this CPU) rather than by the release script, which compiles the portable levels
(minutes each): the packing is the same (scripts/build_artifacts_wheel.py).

Where the aarch64 toolchain is installed (scripts/install-system-deps.sh; scripts/test.sh as root does), the release
script also cross-builds the aarch64 wheel: its tag, its code's architecture and pip's refusal of it here are checked.

Costs: the zig release build (about 1.5 min warm, 2.5 min cold on 2 cores; the aarch64 one ~1 min more), the
shared random-weights artifact (tests/conftest.py), and the sdist build, which
reuses the repo's cargo target dir so only our two crates compile (about 1 min).
Installs go through uv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from system_tools import require_aarch64_toolchain

ROOT = Path(__file__).resolve().parents[1]
TEXT = "Hello world."
SPEED = 9.0  # few frames per token: a short run on the same code path
# The runtime's own check that the plugin is in TVM's registry: snake against numpy.
KERNEL_CHECK = """
import numpy as np, tvm, kokoro_tvm_ext
f = tvm.get_global_func("kokoro_tvm_ext.snake")
x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 2, 6)
a = np.array([0.5, 2.0], np.float32).reshape(1, 2, 1)
out = tvm.runtime.tensor(np.zeros_like(x))
f(tvm.runtime.tensor(x), tvm.runtime.tensor(a), out)
assert np.allclose(out.numpy(), x + np.sin(a * x) ** 2 / a, atol=1e-5)
print("KERNEL-OK", kokoro_tvm_ext.__file__)
"""


def _run(cmd, **kw):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _bare_env(venv: Path, *extra_path: str) -> dict:
    """The venv's bin/ (plus ``extra_path``) on PATH; no LD_LIBRARY_PATH, PYTHONPATH or build tools."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    keep += ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_CACHE_DIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *extra_path])
    return env


def _uv_pip(venv: Path, *args, env: dict | None = None):
    """``uv pip ARGS`` on ``venv`` (uv from this interpreter; the venv gets no pip)."""
    return _run([sys.executable, "-m", "uv", "pip", *args, "--python", venv / "bin" / "python"], env=env)


def _installed(venv: Path) -> set[str]:
    listed = _uv_pip(venv, "list", "--format=json", env=_bare_env(venv)).stdout
    return {p["name"].lower() for p in json.loads(listed)}


@pytest.fixture(scope="module")
def dist() -> Path:
    """The release script's wheel and sdist (its prebuilt libraries left out: the companion wheel below), built
    once per run (release_build.py)."""
    from release_build import release_dist

    return release_dist()


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (built,) = dist.glob("*_x86_64.whl")
    return built


@pytest.fixture(scope="module")
def arm_wheel(request) -> Path:
    """The aarch64 wheel, cross-built where scripts/install-system-deps.sh installed the toolchain (skipped without
    it before the release build)."""
    require_aarch64_toolchain()
    (built,) = request.getfixturevalue("dist").glob("*_aarch64.whl")
    return built


@pytest.fixture(scope="module")
def bare_venv(wheel, tmp_path_factory) -> Path:
    """A virtualenv holding the wheel and its runtime dependencies only (no extras)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    _run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, venv])
    _uv_pip(venv, "install", "-q", wheel, env=_bare_env(venv))
    return venv


@pytest.fixture(scope="module")
def speak_venv(bare_venv, wheel) -> Path:
    """``bare_venv`` with the ``speak`` extra: the runtime-only install for speaking (WAV output, G2P, the
    offline weights' rebuild), no torch."""
    _uv_pip(bare_venv, "install", "-q", f"{wheel}[speak]", env=_bare_env(bare_venv))
    return bare_venv


@pytest.fixture(scope="module")
def artifacts_wheel(small_artifact, tmp_path_factory) -> Path:
    """The companion wheel, its one library the session artifact's (compiled for this CPU), without weights."""
    level = json.loads((small_artifact / "meta.json").read_text())["target"]["mcpu"]
    out = tmp_path_factory.mktemp("artifacts-dist")
    _run(
        [sys.executable, ROOT / "scripts" / "build_artifacts_wheel.py", out, "--artifact", f"{level}={small_artifact}"]
    )
    (built,) = out.glob("kokoro_tvm_ext_artifacts-*.whl")
    return built


@pytest.fixture(scope="module")
def voices_sdist(tmp_path_factory) -> Path:
    from voice_sdist import fetch_sdist

    return fetch_sdist(tmp_path_factory)


@pytest.fixture
def empty_cache_env(speak_venv, voices_sdist, tmp_path_factory) -> dict:
    """The bare environment with a fresh kokoro-tvm cache and the voices' sdist (as tests/test_cli.py)."""
    from kokoro_tvm_ext.speech.voices import sdist as sdist_voices

    env = _bare_env(speak_venv)
    env["KOKORO_TVM_CACHE"] = str(tmp_path_factory.mktemp("empty-cache"))
    env[sdist_voices.SDIST_ENV] = str(voices_sdist)
    return env


def test_wheel_is_tagged_abi3_manylinux_2_28_or_older(wheel):
    m = re.fullmatch(r"kokoro_tvm_ext-[\w.]+-cp310-abi3-manylinux_2_(\d+)_x86_64\.whl", wheel.name)
    assert m, wheel.name
    assert int(m.group(1)) <= 28
    metadata = zipfile.ZipFile(wheel).read(f"kokoro_tvm_ext-{wheel.name.split('-')[1]}.dist-info/WHEEL").decode()
    assert f"Tag: {'-'.join(wheel.name[:-4].split('-')[2:])}" in metadata.splitlines()


def test_wheel_carries_no_tvm_ffi_copy(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("kokoro_tvm_ext/_native") for n in names)
    assert not [n for n in names if "libtvm_ffi" in n], "a second libtvm_ffi would be a second registry"


def test_auditwheel_agrees_with_the_tag_but_for_libtvm_ffi(wheel):
    report = json.loads(_run([sys.executable, "-m", "auditwheel", "show", "--json", wheel]).stdout)
    tag = wheel.name[:-4].split("-")[-1]
    assert report["sym_tag"] == tag  # glibc symbol versions: exactly what the tag promises
    assert set(report["external_libs"]) == {"libtvm_ffi.so"}
    assert report["policy_upgrades"][tag]["libs_to_eliminate"] == ["libtvm_ffi.so"]
    assert not report["unsupported_isa"]
    glibc = {v for versions in report["versioned_symbols"].values() for v in versions if v.startswith("GLIBC_")}
    newest = max(tuple(map(int, v[len("GLIBC_") :].split("."))) for v in glibc)
    assert newest <= (2, 28), sorted(glibc)


def test_the_aarch64_wheel_is_an_abi3_manylinux_2_28_wheel_of_aarch64_code(arm_wheel):
    """The same package for ARM64: tagged as PyPI accepts it, its extension an aarch64 ELF that links glibc 2.28's
    symbols at most (auditwheel reads ELF of any architecture) and leaves libtvm_ffi to apache-tvm-ffi's wheel."""
    assert re.fullmatch(r"kokoro_tvm_ext-[\w.]+-cp310-abi3-manylinux_2_28_aarch64\.whl", arm_wheel.name)
    with zipfile.ZipFile(arm_wheel) as z:
        (native,) = [n for n in z.namelist() if n.startswith("kokoro_tvm_ext/_native")]
        header = z.read(native)[:20]
        assert not [n for n in z.namelist() if "libtvm_ffi" in n]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183  # EM_AARCH64
    check = _run([sys.executable, ROOT / "scripts" / "check_wheel_tag.py", arm_wheel])
    assert check.stdout.startswith("ok:"), check.stdout


def test_pip_refuses_a_wheel_of_the_other_architecture(arm_wheel, tmp_path):
    """On this x86-64 machine pip says the aarch64 wheel is not for it, in one line: nothing is installed, and
    nothing crashes on an illegal instruction."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", tmp_path / "site", arm_wheel],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert f"{arm_wheel.name} is not a supported wheel on this platform" in result.stderr, result.stderr
    assert not (tmp_path / "site" / "kokoro_tvm_ext").exists()


def test_wheel_runs_in_a_bare_venv_with_its_runtime_dependencies_only(bare_venv):
    names = _installed(bare_venv)
    assert {"kokoro-tvm-ext", "apache-tvm", "apache-tvm-ffi", "numpy"} <= names
    assert not names & {"torch", "kokoro", "maturin", "soundfile"}, names
    result = _run([bare_venv / "bin" / "python", "-c", KERNEL_CHECK], env=_bare_env(bare_venv), cwd=bare_venv)
    assert f"KERNEL-OK {bare_venv}" in result.stdout  # the installed copy, not the source tree


def test_the_speak_extra_says_text_in_the_bare_venv_as_pytorch_does_without_torch(
    speak_venv, small_artifact, kokoro_model, tmp_path
):
    sf = pytest.importorskip("soundfile")
    from kokoro_tvm_ext.model.adapters.reference import reference, reference_float64
    from kokoro_tvm_ext.speech import load_config, phonemize, style_for, tokenize
    from kokoro_tvm_ext.speech.edges import edge_cut

    bare_venv, env = speak_venv, _bare_env(speak_venv)
    names = _installed(bare_venv)
    assert {"av", "misaki", "spacy", "onnx"} <= names and not names & {"torch", "kokoro"}, names
    no_torch = subprocess.run([bare_venv / "bin" / "python", "-c", "import torch"], capture_output=True, text=True)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    voice = tmp_path / "voice.npy"
    pack = (np.random.default_rng(7).standard_normal((510, 1, 256)) * 0.3).astype(np.float32)
    np.save(voice, pack)
    out = tmp_path / "hello.wav"
    _run(
        [
            bare_venv / "bin" / "kokoro-tvm",
            "say",
            TEXT,
            "--lang",
            "en-us",
            "--artifact",
            small_artifact,
            "--voice",
            voice,
            "--speed",
            SPEED,
            "--seed",
            0,
            "-o",
            out,
        ],
        env=env,
        cwd=tmp_path,
    )
    audio, rate = sf.read(out, dtype="float32")
    assert rate == 24000

    # The reference: this environment's G2P (with torch installed) and PyTorch.
    tokens = np.array(tokenize(phonemize(TEXT, "a"), load_config()["vocab"]), np.int64)
    style = style_for(pack, len(tokens))
    ref_audio, durations = reference(kokoro_model, tokens, style, speed=SPEED, noise_seed=0)
    truth = reference_float64(kokoro_model, tokens, style, durations, speed=SPEED, noise_seed=0)
    # One chunk keeps the model's edges; where its sound stops loud (the random weights' noise) it fades out.
    cut = edge_cut(ref_audio, None, None)
    ref_audio, truth = cut.apply(ref_audio), cut.apply(truth)
    assert len(audio) == len(ref_audio)
    pcm_step = 1 / 32768  # the WAV is 16-bit
    ours, theirs = np.abs(audio - truth).max(), np.abs(ref_audio - truth).max()
    print(f"wheel's say vs float64: {ours:.3g}; PyTorch fp32 vs float64: {theirs:.3g}")
    assert ours <= max(theirs, 1e-4 * np.abs(truth).max()) + pcm_step


def _one_line_error(result) -> str:
    """The error line a failed command ended with (notes may come before it), no traceback."""
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def test_without_prebuilt_libraries_or_torch_say_names_what_to_install(speak_venv, empty_cache_env, tmp_path):
    out = tmp_path / "x.wav"
    said = subprocess.run(
        [speak_venv / "bin" / "kokoro-tvm", "say", "Hello there.", "-o", out],
        env=empty_cache_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    line = _one_line_error(said)
    assert said.returncode == 3 and line.startswith("kokoro-tvm say: no compiled Kokoro for this CPU"), line
    assert 'pip install "kokoro-tvm-ext-artifacts==' in line and 'pip install "kokoro-tvm-ext[compile]"' in line
    assert not out.exists()
    compiled = subprocess.run(
        [speak_venv / "bin" / "kokoro-tvm", "compile"],
        env=empty_cache_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert 'compiling needs torch and kokoro: pip install "kokoro-tvm-ext[compile]"' in _one_line_error(compiled)


def test_with_the_prebuilt_libraries_say_speaks_from_an_empty_cache(
    speak_venv, artifacts_wheel, empty_cache_env, tmp_path
):
    sf = pytest.importorskip("soundfile")
    _uv_pip(speak_venv, "install", "-q", artifacts_wheel, env=empty_cache_env)
    try:
        out = tmp_path / "x.wav"
        said = _run(
            [speak_venv / "bin" / "kokoro-tvm", "say", "Hello there.", "-o", out], env=empty_cache_env, cwd=tmp_path
        )
    finally:  # the other tests run without it
        _uv_pip(speak_venv, "uninstall", "-q", "kokoro-tvm-ext-artifacts", env=empty_cache_env)
    print(said.stderr)
    assert "Traceback" not in said.stderr and "compiling" not in said.stderr
    assert "rebuilding them from the int8 ONNX model" in said.stderr  # the offline weights, with numpy and onnx
    assert re.search(r"binding the weights to the compiled Kokoro in .*kokoro_tvm_ext_artifacts", said.stderr)
    assert re.search(r"\(no compile\) \.\.\. done \(\d+\.\d s\)", said.stderr)
    timed = [line for line in said.stderr.splitlines() if re.search(r"\d+(\.\d+)?\s?s\b", line)]
    assert len(timed) >= 3, said.stderr  # each step says its time
    audio, rate = sf.read(out, dtype="float32")
    seconds = len(audio) / rate
    assert rate == 24000 and 0.5 < seconds < 4, seconds  # two words of real speech
    assert np.sqrt(np.mean(audio**2)) > 0.01  # not silence


def test_sdist_builds_and_installs_in_a_clean_venv_with_cargo(dist, tmp_path):
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("building the sdist needs cargo")
    (sdist,) = dist.glob("*.tar.gz")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, venv])
    # cargo, and the C linker rustc calls; the repo's target dir keeps compiled
    # dependencies (gemm, pyo3, ...) so only our crates compile from the sdist.
    env = {**_bare_env(venv, str(Path(cargo).parent), "/usr/bin", "/bin"), "CARGO_TARGET_DIR": str(ROOT / "target")}
    env.update({k: os.environ[k] for k in ("RUSTUP_HOME", "CARGO_HOME") if k in os.environ})
    from release_build import one_build_at_a_time

    with one_build_at_a_time():  # maturin stages its extension in the shared target dir
        _uv_pip(venv, "install", "-q", sdist, env=env)
    result = _run([venv / "bin" / "python", "-c", KERNEL_CHECK], env=_bare_env(venv), cwd=venv)
    assert f"KERNEL-OK {venv}" in result.stdout
