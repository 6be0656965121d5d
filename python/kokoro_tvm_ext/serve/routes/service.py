"""A request's way to the model, which the speech routes call for it (as Kokoro-FastAPI's routers call its TTS
service): its text or phonemes planned in a worker thread (``plan.py``: G2P takes up to a second and must not
hold the event loop; every input error named by its field), then its chunks put on the scheduler as a
``ChunkStream``, cancelled when the request ends.

A route gets one per request (``service: ServiceDep``), holding the app's speaker, scheduler, voices and limits
(``state.py``) and the request's guard context, whose cancel event stops the planning if the client leaves or
the deadline passes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.serve.chunk_stream import ChunkStream
from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.guard import RequestContext
from kokoro_tvm_ext.serve.plan import Limits, dialogue_text, phonemize, plan_phonemes, plan_speech
from kokoro_tvm_ext.serve.requests import (
    AudioOptions,
    DialogueRequest,
    PhonemeSpeechRequest,
    PhonemizeRequest,
    SpeechRequest,
)
from kokoro_tvm_ext.serve.routes.state import ContextDep, LimitsDep, SchedulerDep, SpeakerDep, VoicesDep
from kokoro_tvm_ext.serve.scheduler import Scheduler
from kokoro_tvm_ext.serve.voices import VoiceBook


class SpeechService:
    def __init__(self, speaker, scheduler: Scheduler, voices: VoiceBook, limits: Limits, context: RequestContext):
        self.speaker, self.scheduler, self.voices, self.limits = speaker, scheduler, voices, limits
        self.context = context

    @property
    def sample_rate(self) -> int:
        return self.speaker.sample_rate

    async def speak_text(self, req: SpeechRequest) -> ChunkStream:
        """``req.input`` in ``req.voice`` (and ``req.lang_code``), one sentence per chunk, the first cut early."""
        return await self._speak(req.input, req.voice, req, ssml=req.ssml)

    async def speak_dialogue(self, req: DialogueRequest) -> ChunkStream:
        """The turns, each in its voice: the speech of the same turns written as voice tags."""
        if not self.limits.voice_tags:
            raise ApiError(403, "this server reads no voice tags (--no-voice-tags), so no dialogue", code="forbidden")
        return await self._speak(dialogue_text(req.turns, req.pause_between_turns), req.turns[0].voice, req)

    async def _speak(self, text: str, voice: str, req, *, ssml: bool = False) -> ChunkStream:
        def plan(cancel):
            return plan_speech(
                self.speaker,
                text,
                voice,
                req.speed,
                req.lang_code,
                voices=self.voices,
                limits=self.limits,
                cancel=cancel,
                aliases=req.voice_aliases,
                ssml=ssml,
            )

        return await self._start(plan, req)

    async def speak_phonemes(self, req: PhonemeSpeechRequest) -> ChunkStream:
        """Kokoro phonemes as given, in ``req.voice``."""

        def plan(cancel):
            return plan_phonemes(
                self.speaker, req.phonemes, req.voice, req.speed, voices=self.voices, limits=self.limits, cancel=cancel
            )

        return await self._start(plan, req)

    async def phonemize(self, req: PhonemizeRequest) -> dict:
        """``{"phonemes", "tokens"}`` the model would get for ``req.text``; no model time."""
        cancel = self.context.cancel
        return await run_in_threadpool(
            lambda: phonemize(self.speaker, req.text, req.language, limits=self.limits, cancel=cancel)
        )

    async def _start(self, plan_request, options: AudioOptions) -> ChunkStream:
        """``plan_request(cancel)`` in a worker thread, then its chunks on the scheduler."""
        context = self.context
        plan = await run_in_threadpool(plan_request, context.cancel)
        stream = ChunkStream(
            self.scheduler, plan, on_audio=context.extend, volume=options.volume_multiplier, since=context.arrived
        )
        context.on_close(stream.cancel)
        return stream


async def _service(
    speaker: SpeakerDep, scheduler: SchedulerDep, voices: VoicesDep, limits: LimitsDep, context: ContextDep
) -> SpeechService:
    return SpeechService(speaker, scheduler, voices, limits, context)


ServiceDep = Annotated[SpeechService, Depends(_service)]
