"""/web in a real headless Chromium (Debian's package, driven by Playwright) against a live `kokoro-tvm serve`: the
page lists the server's voices by language, speaks while the stream comes in, highlights the word being spoken,
saves the audio, and shows the server's errors (a 400, a 401 without the API key) on the page."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import SPEED
from fakes import fake_server
from system_tools import skip_reason

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=skip_reason("chromium") or "")

# Three chunks (the first is cut early), so the audio can start before the stream ends; short, as random weights
# speak slowly.
TEXT = "Hi, you. Go on!"
TIMEOUT_MS = 60_000
PLAYER = "document.getElementById('player')"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            # Play without a click's user activation, to a fake audio device (headless has no sound card).
            args=["--autoplay-policy=no-user-gesture-required", "--use-fake-ui-for-media-stream"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    problems = []
    page.on("pageerror", lambda err: problems.append(str(err)))
    yield page
    context.close()
    assert not problems, f"uncaught errors on the page: {problems}"


def open_page(page, server: str):
    page.goto(f"{server}/web/")
    page.wait_for_selector("#voice option", state="attached")


def test_page_lists_the_voices_by_language_and_speak_is_the_first_button(page, server):
    listing = httpx.get(f"{server}/v1/audio/voices", timeout=30).json()["voices"]
    open_page(page, server)
    assert page.locator("button").first.inner_text() == "Speak"
    groups = page.eval_on_selector_all(
        "#voice optgroup",
        "gs => gs.map(g => [g.dataset.language, [...g.querySelectorAll('option')].map(o => o.value)])",
    )
    by_language: dict[str, list[str]] = {}
    for v in listing:
        by_language.setdefault(v["language"] or "", []).append(v["id"])
    assert dict(groups) == by_language
    assert len(groups) == len(by_language)  # one group per language, none repeated
    assert page.locator("#voice option").count() == len(listing)
    assert page.locator("#blend-voice option").count() == len(listing) + 1  # and "none"
    # Every control has a label.
    unlabelled = page.eval_on_selector_all(
        "textarea, select, input", "cs => cs.filter(c => !c.labels || c.labels.length === 0).map(c => c.id)"
    )
    assert unlabelled == []


def test_speak_streams_plays_highlights_words_and_downloads(page, server, tmp_path):
    open_page(page, server)
    page.fill("#text", TEXT)
    page.fill("#speed", str(SPEED))
    page.select_option("#voice", "af_heart")
    page.select_option("#blend-voice", "am_adam")
    page.fill("#blend-weight", "0.4")
    assert page.inner_text("#blend-spec") == "af_heart:0.60,am_adam:0.40"
    # When the audio starts playing and when the last byte of the stream is in, on the page's clock.
    page.evaluate(
        f"""() => {{
        window.seen = {{}};
        {PLAYER}.addEventListener('playing', () => {{ window.seen.playing ??= performance.now(); }});
        const status = document.getElementById('status');
        new MutationObserver(() => {{
            if (status.textContent.startsWith('Done')) window.seen.done ??= performance.now();
        }}).observe(status, {{childList: true, characterData: true, subtree: true}});
    }}"""
    )
    with page.expect_request("**/dev/captioned_speech") as sent:
        page.click("#speak")
    assert sent.value.post_data_json["voice"] == "af_heart:0.60,am_adam:0.40"

    page.wait_for_function(f"{PLAYER}.currentTime > 0")
    page.wait_for_selector("#words span.current[aria-current=true]")
    page.wait_for_function("window.seen.done !== undefined")
    seen = page.evaluate("window.seen")
    assert seen["playing"] < seen["done"], "the audio started only after the whole stream was in"
    assert page.locator("#error").is_hidden()
    # The words of the timestamps, in order, punctuation against the word before it.
    assert page.inner_text("#words") == TEXT
    page.wait_for_function(f"isFinite({PLAYER}.duration)")  # once the player's MediaSource has ended
    duration = page.evaluate(f"{PLAYER}.duration")
    last_word_end = page.evaluate("timedWords.at(-1).end")
    assert last_word_end - 0.05 < duration < last_word_end + 1.0
    page.screenshot(path=tmp_path / "web.png", full_page=True)

    # The download is the mp3 that played, whole: as long as the player's audio.
    with page.expect_download() as download:
        page.click("#download")
    mp3 = download.value.path().read_bytes()
    av = pytest.importorskip("av")
    with av.open(str(download.value.path())) as container:
        seconds = sum(f.samples for f in container.decode(audio=0)) / 24000
    assert mp3[:3] == b"ID3" or mp3[0] == 0xFF
    assert abs(seconds - duration) < 0.2

    # Another format: the same speech made again in it.
    page.select_option("#format", "wav")
    assert page.inner_text("#download") == "Download the audio (wav)"
    with page.expect_download() as download:
        page.click("#download")
    wav = download.value.path().read_bytes()
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    assert download.value.suggested_filename == "speech.wav"


def test_empty_text_spoken_from_the_keyboard_shows_the_servers_message(page, server):
    reference = httpx.post(f"{server}/dev/captioned_speech", json={"input": " "}, timeout=30)
    assert reference.status_code == 400
    message = reference.json()["error"]["message"]
    open_page(page, server)
    page.fill("#text", " ")
    page.keyboard.press("Control+Enter")  # from the keyboard, in the text box
    error = page.locator("#error")
    error.wait_for(state="visible")
    assert message in error.inner_text()
    assert "400" in error.inner_text()


def test_with_api_keys_the_page_asks_for_the_key_then_sends_it(browser):
    """The server's own app and key check on a stand-in speaker (fakes.py): what is under test is the page."""
    key = "web-test-key"
    with fake_server(chunk_seconds=0.3, api_keys=(key,)) as (server, _):
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        answers = []
        page.on("response", lambda r: answers.append((r.url.removeprefix(server), r.status)))
        page.goto(f"{server}/web/")
        error = page.locator("#error")
        error.wait_for(state="visible")
        assert "(401)" in error.inner_text() and "API key" in error.inner_text()
        assert page.locator("#api-key").is_visible()
        assert ("/v1/audio/voices", 401) in answers

        page.fill("#api-key", key)
        page.fill("#text", "one two three")
        with page.expect_request("**/dev/captioned_speech") as sent:
            page.click("#speak")
        assert sent.value.headers["authorization"] == f"Bearer {key}"
        page.wait_for_function(f"{PLAYER}.currentTime > 0")
        assert error.is_hidden()
        assert ("/v1/audio/voices", 200) in answers  # listed again, with the key
        assert ("/dev/captioned_speech", 200) in answers
        assert page.evaluate("sessionStorage.getItem('kokoro-tvm.api-key')") == key
        context.close()


def test_a_busy_server_is_said_on_the_page(page):
    """A 429 (the one request the server takes is held in planning): its message and Retry-After on the page."""
    with fake_server(chunk_seconds=0.3, max_requests=1) as (server, speaker), ThreadPoolExecutor(1) as pool:
        speaker.release.clear()
        held = pool.submit(httpx.post, f"{server}/v1/audio/speech", json={"input": "hold"}, timeout=30)
        assert speaker.planning.acquire(timeout=10)
        reference = httpx.post(f"{server}/v1/audio/speech", json={"input": "one"}, timeout=30)
        assert reference.status_code == 429
        page.goto(f"{server}/web/")
        page.fill("#text", "one two")
        page.click("#speak")
        error = page.locator("#error")
        error.wait_for(state="visible")
        assert "(429)" in error.inner_text() and reference.json()["error"]["message"] in error.inner_text()
        assert f"Try again in {reference.headers['retry-after']} s." in error.inner_text()
        speaker.release.set()
        assert held.result().status_code == 200
        page.close()  # its open connection would hold up the server's shutdown
