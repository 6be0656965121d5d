// The /web page: speak through this server's API, play while the audio streams in, highlight the word being spoken.
// Plain browser JavaScript, no build step and nothing fetched from elsewhere.
"use strict";

const API = new URL("../", document.baseURI); // the page lives at <server>/web/
const KEY_STORE = "kokoro-tvm.api-key";
const STREAM_FORMAT = "mp3"; // what the player streams: MediaSource takes audio/mpeg, not wav/flac/pcm
const $ = (id) => document.getElementById(id);
const ui = {
  form: $("speak-form"),
  text: $("text"),
  voice: $("voice"),
  speed: $("speed"),
  format: $("format"),
  blendVoice: $("blend-voice"),
  blendWeight: $("blend-weight"),
  blendWeightValue: $("blend-weight-value"),
  blendSpec: $("blend-spec"),
  keyField: $("key-field"),
  key: $("api-key"),
  speak: $("speak"),
  error: $("error"),
  status: $("status"),
  player: $("player"),
  download: $("download"),
  words: $("words"),
};

class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// ---- API calls: every one carries the key when there is one ----

function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORE) || "";
  } catch {
    return ""; // storage disabled: the key lives in the field only
  }
}

function storeKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
  } catch {
    /* storage disabled */
  }
}

function headers(json) {
  const h = json ? { "Content-Type": "application/json" } : {};
  const key = ui.key.value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function call(path, body, signal) {
  const init = body === undefined ? { headers: headers(false) } : {
    method: "POST", headers: headers(true), body: JSON.stringify(body),
  };
  const response = await fetch(new URL(path, API), { ...init, signal });
  if (!response.ok) throw await apiError(response);
  return response;
}

async function apiError(response) {
  let message = response.statusText || "no message";
  try {
    const body = await response.json();
    message = body?.error?.message ?? body?.detail ?? JSON.stringify(body);
  } catch {
    /* not JSON: keep the status text */
  }
  return new ApiError(response.status, message, response.headers.get("Retry-After"));
}

// ---- messages on the page ----

function showError(err) {
  if (err?.name === "AbortError") return; // a newer Speak replaced this one
  let text;
  if (err instanceof ApiError) {
    if (err.status === 401) {
      ui.keyField.hidden = false;
      text = `The server needs an API key (401): ${err.message}. Enter it in the API key field.`;
    } else if (err.status === 429) {
      const wait = err.retryAfter ? ` Try again in ${err.retryAfter} s.` : " Try again in a moment.";
      text = `The server is busy (429): ${err.message}.${wait}`;
    } else {
      text = `The server answered ${err.status}: ${err.message}`;
    }
  } else {
    text = `Could not reach the server: ${err?.message ?? err}`;
  }
  ui.error.textContent = text;
  ui.error.hidden = false;
  ui.status.textContent = "";
  if (err?.status === 401) ui.key.focus();
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

// ---- voices, grouped by language ----

let voicesLoaded = null; // the promise of the listing, dropped when it failed so the next call retries

function languageName(tag) {
  if (!tag) return "Other";
  try {
    const name = new Intl.DisplayNames([navigator.language, "en"], { type: "language" }).of(tag);
    return name && name !== tag ? `${name} (${tag})` : tag;
  } catch {
    return tag;
  }
}

function fillVoices(select, groups, chosen) {
  for (const [tag, voices] of groups) {
    const group = document.createElement("optgroup");
    group.label = languageName(tag);
    group.dataset.language = tag ?? "";
    for (const v of voices) {
      const option = new Option(v.gender ? `${v.name} (${v.gender})` : v.name, v.id);
      option.selected = v.id === chosen;
      group.append(option);
    }
    select.append(group);
  }
}

async function loadVoices() {
  const response = await call("v1/audio/voices");
  const { voices } = await response.json();
  const groups = new Map();
  for (const v of voices) {
    if (!groups.has(v.language)) groups.set(v.language, []);
    groups.get(v.language).push(v);
  }
  const chosen = voices.some((v) => v.id === "af_heart") ? "af_heart" : voices[0]?.id;
  ui.voice.replaceChildren();
  ui.blendVoice.replaceChildren(new Option("none", ""));
  fillVoices(ui.voice, groups, chosen);
  fillVoices(ui.blendVoice, groups, null);
  ui.blendVoice.value = "";
  updateBlend();
}

function ensureVoices() {
  if (!voicesLoaded) {
    voicesLoaded = loadVoices().catch((err) => {
      voicesLoaded = null;
      throw err;
    });
  }
  return voicesLoaded;
}

// Kokoro's blend syntax: "af_heart:0.6,am_adam:0.4" (the server normalizes the weights).
function voiceSpec() {
  const first = ui.voice.value;
  const second = ui.blendVoice.value;
  const share = Number(ui.blendWeight.value);
  if (!second || second === first) return first;
  return `${first}:${(1 - share).toFixed(2)},${second}:${share.toFixed(2)}`;
}

function updateBlend() {
  ui.blendWeightValue.textContent = Number(ui.blendWeight.value).toFixed(2);
  ui.blendSpec.textContent = voiceSpec() || "(the server's default)";
}

// ---- playback while the stream comes in ----

// Appends each chunk's mp3 to a MediaSource the <audio> plays, so playing starts with the first chunk.
// Without MediaSource (or its audio/mpeg), the audio plays once it is all in.
class StreamPlayer {
  constructor(audio) {
    this.audio = audio;
    this.parts = [];
    this.pending = [];
    this.ended = false;
    this.streaming = "MediaSource" in window && MediaSource.isTypeSupported("audio/mpeg");
    if (this.streaming) {
      this.source = new MediaSource();
      this.url = URL.createObjectURL(this.source);
      audio.src = this.url;
      this.opened = new Promise((resolve) => this.source.addEventListener("sourceopen", resolve, { once: true }));
      this.opened.then(() => {
        this.buffer = this.source.addSourceBuffer("audio/mpeg");
        this.buffer.mode = "sequence"; // chunks play back to back, whatever timestamps the frames carry
        this.buffer.addEventListener("updateend", () => this.pump());
        this.pump();
      });
    }
  }

  append(bytes) {
    if (!bytes.length) return;
    this.parts.push(bytes);
    if (!this.streaming) return;
    this.pending.push(bytes);
    this.pump();
    if (this.parts.length === 1) this.play();
  }

  finish() {
    this.ended = true;
    if (this.streaming) {
      this.pump();
    } else {
      this.url = URL.createObjectURL(this.blob());
      this.audio.src = this.url;
      this.play();
    }
  }

  pump() {
    if (!this.buffer || this.buffer.updating || this.source.readyState !== "open") return;
    if (this.pending.length) this.buffer.appendBuffer(this.pending.shift());
    else if (this.ended) this.source.endOfStream();
  }

  play() {
    this.audio.play().catch(() => {
      ui.status.textContent = "The browser did not start the audio by itself: press play.";
    });
  }

  blob() {
    return new Blob(this.parts, { type: "audio/mpeg" });
  }

  stop() {
    this.ended = true;
    this.pending = [];
    this.audio.pause();
    this.audio.removeAttribute("src");
    this.audio.load();
    if (this.url) URL.revokeObjectURL(this.url);
  }
}

// NDJSON: one JSON object per line, lines split across network reads.
async function* jsonLines(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += value;
    let end;
    while ((end = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, end);
      rest = rest.slice(end + 1);
      if (line.trim()) yield JSON.parse(line);
    }
  }
  if (rest.trim()) yield JSON.parse(rest);
}

function base64Bytes(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

// ---- the spoken word ----

const CLOSING = /^[\p{Po}\p{Pe}\p{Pf}]+$/u; // "," "." "!" ")" ...: no space before them
// Japanese and Mandarin are written without spaces: none beside their characters and full-width marks.
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\u3000-\u303f\uff00-\uffef]/u;
let timedWords = []; // {start, end, element}, in order
let shownWord = null;

function addWords(timestamps) {
  for (const t of timestamps ?? []) {
    const element = document.createElement("span");
    element.textContent = t.word;
    element.title = `${t.start_time.toFixed(2)}–${t.end_time.toFixed(2)} s`;
    const before = timedWords.at(-1)?.element.textContent.slice(-1) ?? "";
    const joined = UNSPACED.test(before) || UNSPACED.test(t.word.slice(0, 1));
    if (timedWords.length && !CLOSING.test(t.word) && !joined) ui.words.append(" ");
    ui.words.append(element);
    timedWords.push({ start: t.start_time, end: t.end_time, element });
  }
}

function highlight() {
  const now = ui.player.currentTime;
  const current = timedWords.find((w) => w.start <= now && now < w.end) ?? null;
  if (current === shownWord) return;
  shownWord?.element.classList.remove("current");
  shownWord?.element.removeAttribute("aria-current");
  current?.element.classList.add("current");
  current?.element.setAttribute("aria-current", "true");
  shownWord = current;
}

function followPlayback() {
  highlight();
  if (!ui.player.paused && !ui.player.ended) requestAnimationFrame(followPlayback);
}

ui.player.addEventListener("play", () => requestAnimationFrame(followPlayback));
ui.player.addEventListener("seeked", highlight);
ui.player.addEventListener("timeupdate", highlight);
ui.player.addEventListener("ended", highlight);

// ---- download: the mp3 that played, or the same speech again in the chosen format ----

let lastRequest = null;
let player = null;
let downloadUrl = null;

function offerDownload() {
  if (!lastRequest || !player) return;
  const format = ui.format.value;
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = null;
  ui.download.download = `speech.${format}`;
  ui.download.textContent = `Download the audio (${format})`;
  ui.download.hidden = false;
  if (format === STREAM_FORMAT) {
    downloadUrl = URL.createObjectURL(player.blob());
    ui.download.href = downloadUrl;
  } else {
    ui.download.href = "#"; // made when clicked: one more synthesis, in that format
  }
}

ui.download.addEventListener("click", async (event) => {
  if (downloadUrl) return; // the browser saves the blob
  event.preventDefault();
  const format = ui.format.value;
  clearError();
  ui.status.textContent = `Making the ${format} file…`;
  try {
    const response = await call("v1/audio/speech", { ...lastRequest, response_format: format, stream: false });
    downloadUrl = URL.createObjectURL(await response.blob());
    ui.download.href = downloadUrl;
    ui.status.textContent = `The ${format} file is ready.`;
    ui.download.click();
  } catch (err) {
    showError(err);
  }
});

// ---- Speak ----

let inFlight = null;

async function speak() {
  inFlight?.abort();
  const controller = new AbortController();
  inFlight = controller;
  player?.stop();
  player = null;
  lastRequest = null;
  clearError();
  ui.download.hidden = true;
  ui.words.replaceChildren();
  timedWords = [];
  shownWord = null;
  ui.status.textContent = "Speaking…";
  try {
    await ensureVoices().catch(() => {}); // a voice list that fails leaves the server's default voice
    const request = {
      model: "kokoro",
      input: ui.text.value,
      speed: Number(ui.speed.value),
      response_format: STREAM_FORMAT,
      stream: true,
      return_timestamps: true,
    };
    const voice = voiceSpec();
    if (voice) request.voice = voice;
    const started = performance.now();
    const response = await call("dev/captioned_speech", request, controller.signal);
    const current = new StreamPlayer(ui.player);
    player = current;
    let chunks = 0;
    for await (const chunk of jsonLines(response.body)) {
      current.append(base64Bytes(chunk.audio));
      addWords(chunk.timestamps);
      if (++chunks === 1) {
        const seconds = ((performance.now() - started) / 1000).toFixed(2);
        ui.status.textContent = `Playing: first audio after ${seconds} s…`;
      }
    }
    current.finish();
    lastRequest = { ...request };
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    ui.status.textContent = `Done: ${chunks} chunk${chunks === 1 ? "" : "s"} in ${seconds} s.`;
    offerDownload();
  } catch (err) {
    showError(err);
  } finally {
    if (inFlight === controller) inFlight = null;
  }
}

ui.form.addEventListener("submit", (event) => {
  event.preventDefault();
  speak();
});
ui.text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    ui.form.requestSubmit();
  }
});
for (const control of [ui.voice, ui.blendVoice, ui.blendWeight]) control.addEventListener("input", updateBlend);
ui.format.addEventListener("change", offerDownload);
// Voice tags (docs/markup.md): the text before the first tag is read by the chosen voice.
$("dialogue-example").addEventListener("click", (event) => {
  event.preventDefault();
  ui.text.value =
    "Did you hear that? [voice:bm_george]Only the wind, my dear. [voice:af_heart]" +
    "It sounded like footsteps. [pause:0.5s] [voice:bm_george][rate:0.8]Then we had better whisper.";
  ui.text.focus();
});
ui.key.addEventListener("change", () => {
  storeKey(ui.key.value.trim());
  clearError();
  ensureVoices().catch(showError);
});

ui.key.value = storedKey();
if (ui.key.value) ui.keyField.hidden = false;
updateBlend();
ensureVoices().catch(showError);
