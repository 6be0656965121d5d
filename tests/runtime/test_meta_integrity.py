"""meta.json is checked like the files it describes: every field by type and range, and each field against the
sha256 recorded when it was compiled. An edited field is refused by name (it used to give wrong audio with exit
0, a KeyError traceback, a skipped CPU check, or an out-of-bounds embedding read), and token ids are bounded by
the embedding the library is handed, whatever n_token says.

Each case edits a copy of ``small_artifact``'s meta.json beside links to its files: the refusal comes before
either file is hashed or mapped, so a case costs milliseconds.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import kokoro_tvm_ext
from kokoro_tvm_ext.errors import ArtifactCorruptError, ArtifactMissingError, InvalidInputError
from kokoro_tvm_ext.model.runtime import artifact
from kokoro_tvm_ext.model.runtime.artifact import (
    DIGESTS,
    FIELDS,
    LIBRARY,
    META,
    OPTIONAL,
    VERIFIED_STAMP,
    WEIGHTS,
    sealed,
)
from kokoro_tvm_ext.model.runtime.cpu_features import check_cpu

SPEED = 9.0  # random weights: few frames per token, short audio


@pytest.fixture(scope="module")
def compiled_meta(small_artifact) -> dict:
    return json.loads((small_artifact / META).read_text())


@pytest.fixture
def edit(small_artifact, compiled_meta, tmp_path):
    """``edit(change, reseal=False)``: a copy of the artifact whose meta.json is ``change(meta)``'s result,
    its digests recomputed if ``reseal`` (a forged meta.json, as opposed to an edited one)."""

    def make(change, reseal: bool = False):
        meta = json.loads(json.dumps(compiled_meta))
        meta = change(meta) or meta
        out = tmp_path / "edited"
        out.mkdir()
        for name in (LIBRARY, WEIGHTS):
            (out / name).symlink_to(small_artifact / name)
            stamp = small_artifact / f"{VERIFIED_STAMP}.{name}"  # the same file's verified hash: not hashed again
            if stamp.is_file():
                shutil.copy(stamp, out / stamp.name)
        (out / META).write_text(json.dumps(sealed(meta) if reseal else meta, indent=2))
        return out

    return make


def refused(out, *fragments):
    with pytest.raises(ArtifactCorruptError) as caught:
        kokoro_tvm_ext.KokoroTVM(out)
    message = str(caught.value)
    assert message.startswith(str(out / META)), message
    for fragment in fragments:
        assert fragment in message, message
    assert "compile again" in message and "\n" not in message
    return message


def test_the_compiled_meta_passes_and_records_a_digest_of_each_field(small_artifact, compiled_meta):
    import hashlib

    assert set(compiled_meta) == {"format_version", *FIELDS}
    recorded = compiled_meta[DIGESTS]
    assert set(recorded) == set(compiled_meta) - {DIGESTS}
    # By hand: sha256 of the value's JSON with sorted keys and no spaces.
    assert recorded["n_token"] == hashlib.sha256(b"178").hexdigest()
    assert (
        recorded["target"]
        == hashlib.sha256(
            json.dumps(compiled_meta["target"], sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    )
    assert artifact.read_meta(small_artifact) == compiled_meta


@pytest.mark.parametrize("field", sorted(set(FIELDS) - set(OPTIONAL)))
def test_a_missing_field_is_named(edit, field):
    refused(edit(lambda meta: {k: v for k, v in meta.items() if k != field}), f"{field} is missing")


def test_an_artifact_from_before_arch_is_read_as_x86_64(edit):
    from kokoro_tvm_ext.model.runtime.cpu_features import artifact_arch

    meta = artifact.read_meta(edit(lambda meta: {k: v for k, v in meta.items() if k != "arch"}))
    assert "arch" not in meta and artifact_arch(meta) == OPTIONAL["arch"] == "x86_64"


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_field_of_the_wrong_type_is_named(edit, compiled_meta, field):
    wrong = {} if isinstance(compiled_meta[field], list) else [compiled_meta[field]]
    refused(edit(lambda meta: meta.update({field: wrong})), f"{field} must be ", f"got {json.dumps(wrong)[:40]}")


def swap_two_offsets(meta):
    entries = meta["weights_index"]["audio_stage"]
    a, b = next((i, j) for i in range(len(entries)) for j in range(i) if entries[i][1:] == entries[j][1:])
    entries[a][0], entries[b][0] = entries[b][0], entries[a][0]  # same shape and dtype: the library would run


@pytest.mark.parametrize(
    "field, change",
    [
        ("weights_index", swap_two_offsets),
        ("n_token", lambda meta: meta.update(n_token=100000)),
        ("cpu_features", lambda meta: meta.update(cpu_features=[])),  # well-typed, but would skip the check
        ("sample_rate", lambda meta: meta.update(sample_rate=48000)),
        ("library_sha256", lambda meta: meta.update(library_sha256="0" * 64)),
    ],
)
def test_an_edited_value_is_named(edit, field, change):
    refused(edit(change), f"{field} is not what was compiled", f"{META} was edited or damaged")


def test_every_edited_field_is_named(edit):
    refused(edit(lambda meta: meta.update(max_batch=1000, sample_rate=1)), "max_batch, sample_rate are not what")


def test_a_null_cpu_features_does_not_skip_the_cpu_check(edit, small_artifact):
    refused(edit(lambda meta: meta.update(cpu_features=None)), "cpu_features must be a list of CPU feature names")
    # Nor does check_cpu itself skip it for a caller that did not read meta.json through read_meta.
    for meta in ({}, {"cpu_features": None}, {"cpu_features": "avx2"}):
        with pytest.raises(ArtifactCorruptError, match="cpu_features in meta.json must be a list"):
            check_cpu(meta, small_artifact)


def test_a_field_added_by_hand_is_named(edit):
    refused(edit(lambda meta: meta.update(vocab_size=100000)), "vocab_size: not written when it was compiled")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda meta: meta.update(n_token=100000), "n_token is 100000 but the token embedding has shape [178, "),
        (lambda meta: meta.update(max_tokens=100000), "max_tokens must be an integer in 1..510, got 100000"),
        (lambda meta: meta.update(token_embeddings=[["text_stage", 100000]]), "names weight 100000 of 'text_stage'"),
        (
            lambda meta: meta["weights_index"]["text_stage"][0].__setitem__(0, meta["weights_bytes"]),
            "weights_index['text_stage'][0] ends at byte ",
        ),
        (
            lambda meta: meta["weights_index"]["text_stage"][0].__setitem__(0, 3),
            "weights_index['text_stage'][0]: the offset must be a multiple of 64",
        ),
        (lambda meta: meta.update(format_version=5), "artifact format 5, this kokoro-tvm-ext reads 6"),
    ],
)
def test_a_forged_meta_is_still_checked_for_consistency(edit, change, message):
    """Recomputed digests pass the digest check; what loading relies on is still checked against the rest."""
    refused(edit(change, reseal=True), message)


def test_an_artifact_of_the_previous_format_says_to_compile_again(edit):
    def format_4(meta):
        return {k: v for k, v in meta.items() if k not in (DIGESTS, "token_embeddings")} | {"format_version": 4}

    refused(edit(format_4), "has artifact format 4, this kokoro-tvm-ext reads 6 (it was compiled by an older version)")


def test_a_meta_without_a_format_is_refused(edit):
    out = edit(lambda meta: {k: v for k, v in meta.items() if k != "format_version"})
    refused(out, "has artifact format null, this kokoro-tvm-ext reads 6 (it was compiled by another version)")


def test_a_library_without_weights_is_consistent_whatever_its_token_embeddings_say(edit):
    """A prebuilt library (model/prebuilt.py) has no checkpoint weights for the embeddings to point into: its
    meta.json passes, and loading it says it holds no weights (the token_embeddings are checked once bound)."""

    def without_weights(meta):
        meta["checkpoint_weights"] = {function: 0 for function in meta["checkpoint_weights"]}
        meta["token_embeddings"] = [["text_stage", 100000]]

    out = edit(without_weights, reseal=True)
    assert artifact.read_meta(out)["token_embeddings"] == [["text_stage", 100000]]
    with pytest.raises(ArtifactMissingError, match=r"holds a compiled library but no weights .*bind_checkpoint"):
        kokoro_tvm_ext.KokoroTVM(out)


def test_the_token_embeddings_are_the_models_tables(small_artifact, compiled_meta, kokoro_model):
    tables = {
        (178, 128): kokoro_model.bert.embeddings.word_embeddings.weight,
        (178, 512): kokoro_model.text_encoder.embedding.weight,
    }
    mapped = np.memmap(small_artifact / WEIGHTS, dtype=np.uint8, mode="r")
    found = {}
    for function, number in compiled_meta["token_embeddings"]:
        offset, shape, dtype = compiled_meta["weights_index"][function][number]
        found[tuple(shape)] = mapped[offset : offset + 4 * shape[0] * shape[1]].view(np.float32).reshape(shape)
    assert found.keys() == tables.keys()
    for shape, table in tables.items():
        np.testing.assert_array_equal(found[shape], table.detach().numpy())


@pytest.fixture(scope="module")
def runtime(small_artifact):
    return kokoro_tvm_ext.KokoroTVM(small_artifact)


STYLE = np.full((1, 256), 0.1, np.float32)


@pytest.mark.parametrize("tokens", [[99999], [5, 178, 6], [2**32 + 5]])  # 2**32 + 5 is 5 as an int32
def test_a_token_id_past_the_embedding_is_refused_whatever_n_token_says(runtime, monkeypatch, tokens):
    monkeypatch.setitem(runtime.meta, "n_token", 100000)  # as if meta.json said so
    with pytest.raises(InvalidInputError, match=rf"token ids must be in 1\.\.177 .*got \[{max(tokens)}\]"):
        runtime.synthesize(tokens, STYLE, speed=SPEED)
    audio, _ = runtime.synthesize([5, 177], STYLE, speed=SPEED)  # the last id is still fine
    assert audio.size and np.isfinite(audio).all()


def test_a_forged_embedding_shape_is_refused_by_the_library_not_read_past(edit):
    """The last line: a meta.json forged consistently (n_token, the table's shape, digests) lets id 99999 past the
    runtime's bound, but the library checks the shape of every weight it is handed and refuses the call."""

    def forge(meta):
        meta["n_token"] = 100000
        meta["token_embeddings"] = [["text_stage", 0]]
        meta["weights_index"]["text_stage"][0][1] = [100000, 128]  # 51 MB: still inside weights.bin

    runtime = kokoro_tvm_ext.KokoroTVM(edit(forge, reseal=True))
    assert runtime.vocab == 100000
    with pytest.raises(ValueError, match="expected 178"):
        runtime.synthesize([99999], STYLE, speed=SPEED)


def imported_from(module: Path) -> dict[str, str]:
    """What ``module`` imports by name (name -> module), read from its source (importing it needs TVM's compiler,
    which a process that already loaded TVM's runtime alone cannot import)."""
    return {
        alias.asname or alias.name: node.module
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_runtime_and_the_compiler_take_their_choices_from_one_place():
    from kokoro_tvm_ext.plugin import choices

    assert (artifact.PRECISIONS, artifact.LSTM_IMPLS) == (choices.PRECISIONS, choices.LSTM_IMPLS)
    plugin = Path(kokoro_tvm_ext.__file__).parent / "plugin"
    assert imported_from(plugin / "frontend" / "__init__.py")["LSTM_IMPLS"] == "kokoro_tvm_ext.plugin.choices"
    assert imported_from(plugin / "passes" / "pack_bf16.py")["PRECISIONS"] == "kokoro_tvm_ext.plugin.choices"
