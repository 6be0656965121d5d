"""One model, many requests: a worker thread that runs requests' planned chunks on the Speaker in a fair order.

Each request is a :class:`Job`, its plan's chunks spoken in order; a job has at most
one chunk waiting at a time (its next one is queued when the previous is done), so
work is cut at chunk granularity and no request holds the model for its whole text.

Order: every job's first chunk goes before any job's later chunk (first audio is
what a listener waits for); among first chunks, arrival order; among later chunks,
earliest playback deadline first: the moment the audio already sent to that client
runs out if it plays in real time from its first chunk. A long request then never
delays a short one's first audio, and no stream starves.

Batching: the worker takes up to ``max_batch`` waiting first chunks and runs them in
one ``Speaker.synthesize`` call, whose text stage is batched across requests (they all wait
for their first audio anyway); each item's audio is delivered as soon as its own
audio stage is done, not when the whole batch is. Later chunks run one at a time: a
batch is not interrupted, so a batch of later chunks would hold back a first chunk
arriving meanwhile by several sentences, for a text stage worth ~6% of a chunk's time
(measured: 0.21 s of 3.7 s for a 75-token sentence). Results go back through each
job's ``deliver`` callback (called on the worker thread). ``cancel`` drops a job's remaining chunks, e.g. when
its client disconnects; ``stats`` counts what was done and what was cancelled, and the audio made. An
``observer`` (``metrics.Metrics``) is told each job's time to first audio and each chunk's synthesis time.

Pacing: given ``ahead``, a job runs at most ``ahead`` chunks ahead of what its consumer has taken (``took``;
the web app paces every job so, a caller that never calls ``took`` leaves ``ahead`` unset). A stream
whose client stops reading stops taking chunks (its response waits on the socket), so its job is parked
with at most ``ahead`` chunks of audio made and not yet sent, instead of its whole text synthesized into
memory; it resumes when the client reads again.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger("kokoro_tvm_ext.serve")


class Job:
    def __init__(self, pieces: list, deliver, seq: int, since: float):
        self.pieces = pieces
        self.since = since  # time.monotonic() of the request's arrival: its time to first audio counts from it
        self.deliver = deliver  # deliver(index, (audio, durations) or None, error or None)
        self.seq = seq
        self.next = 0  # index of the next chunk to synthesize
        self.taken = 0  # chunks the consumer has taken
        self.cancelled = False
        self.queued = False
        self.parked = False  # waiting for its consumer to take chunks
        self.finished = False
        self.first_audio_at: float | None = None
        self.audio_seconds = 0.0

    @property
    def remaining(self) -> int:
        return len(self.pieces) - self.next

    def key(self) -> tuple:
        if self.next == 0:
            return (0, 0.0, self.seq)
        return (1, self.first_audio_at + self.audio_seconds, self.seq)


MAX_BATCH = 4  # first chunks of different requests synthesized in one call
CHUNKS_AHEAD = 2  # a paced job's chunks made and not yet taken by its consumer: one being sent, one ready


class Scheduler:
    def __init__(self, speaker, *, max_batch: int = MAX_BATCH, ahead: int | None = None, observer=None):
        """``speaker``: what synthesizes planned chunks (``Speaker.synthesize``) and its ``sample_rate``;
        ``ahead``: chunks a job may have made and not yet taken by its consumer (None: no pacing);
        ``observer``: has ``observe_first_audio(seconds)`` and ``observe_chunk(seconds)``, called on the worker."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if ahead is not None and ahead < 1:
            raise ValueError(f"ahead must be at least 1, got {ahead}")
        self.speaker = speaker
        self.max_batch = max_batch
        self.ahead = ahead
        self.observer = observer
        self._parked: set[Job] = set()
        self._heap: list[tuple] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._stopping = False
        self.stats = {
            "requests": 0,
            "requests_done": 0,
            "requests_cancelled": 0,
            "chunks_done": 0,
            "chunks_cancelled": 0,
            "batches": 0,
            "errors": 0,
            "audio_seconds": 0.0,
        }
        self._thread = threading.Thread(target=self._loop, name="kokoro-scheduler", daemon=True)
        self._thread.start()

    # -- called from the web app's threads ----------------------------------------------
    def submit(self, pieces: list, deliver, since: float | None = None) -> Job:
        """``pieces``: the chunks' model inputs (``speech.PlannedChunk``: tokens, style, speed, seed);
        ``since``: the ``time.monotonic()`` its request arrived (default: now)."""
        if not pieces:
            raise ValueError("a job needs at least one chunk")
        with self._cv:
            if self._stopping:
                raise RuntimeError("the scheduler is stopped")
            job = Job(pieces, deliver, next(self._seq), time.monotonic() if since is None else since)
            self.stats["requests"] += 1
            self._push(job)
            self._cv.notify()
        return job

    def cancel(self, job: Job) -> None:
        """Drop the job's chunks not yet synthesized (a chunk in progress still finishes)."""
        with self._cv:
            if job.cancelled or job.finished:
                return
            job.cancelled = True
            if job.queued:
                self._heap = [e for e in self._heap if e[-1] is not job]
                heapq.heapify(self._heap)
                job.queued = False
                self._retire_cancelled(job)
            elif job.parked:
                self._unpark(job)
                self._retire_cancelled(job)

    def took(self, job: Job, count: int) -> None:
        """The job's consumer has taken its first ``count`` chunks: a parked job may go on."""
        with self._cv:
            job.taken = max(job.taken, count)
            if job.parked and job.next < job.taken + (self.ahead or 0):
                self._unpark(job)
                self._push(job)
                self._cv.notify()

    def snapshot(self) -> dict:
        with self._cv:
            return {
                **self.stats,
                "queued": len(self._heap),
                "parked": len(self._parked),
                "alive": self._thread.is_alive(),
            }

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout=60)

    # -- the worker thread ------------------------------------------------------------
    def _push(self, job: Job) -> None:
        heapq.heappush(self._heap, (*job.key(), job))
        job.queued = True

    def _unpark(self, job: Job) -> None:
        job.parked = False
        self._parked.discard(job)

    def _retire_cancelled(self, job: Job) -> None:
        self.stats["requests_cancelled"] += 1
        self.stats["chunks_cancelled"] += job.remaining
        job.finished = True

    def _take_batch(self) -> list[Job]:
        with self._cv:
            while not self._heap and not self._stopping:
                self._cv.wait()
            if self._stopping:
                return []
            first = heapq.heappop(self._heap)
            batch = [first[-1]]
            while first[0] == 0 and self._heap and len(batch) < self.max_batch and self._heap[0][0] == 0:
                batch.append(heapq.heappop(self._heap)[-1])
            for job in batch:
                job.queued = False
            return batch

    @staticmethod
    def _deliver(job: Job, index: int, result, error) -> None:
        try:
            job.deliver(index, result, error)
        except Exception:  # noqa: BLE001 - one request's callback must not stop the worker
            log.exception("delivering chunk %d failed", index)

    def _loop(self) -> None:
        while True:
            batch = self._take_batch()
            if not batch:
                return
            pieces = [job.pieces[job.next] for job in batch]
            done = 0
            try:
                results = self.speaker.synthesize(pieces)
                began = time.monotonic()
                for job, result in zip(batch, results):
                    self._chunk_done(job, result, time.monotonic() - began)
                    began = time.monotonic()  # the next item's time starts after this one's hand-over
                    done += 1
            except Exception as err:
                failed = batch[done:]
                log.exception("synthesis failed for %d of a batch of %d chunks", len(failed), len(batch))
                with self._cv:
                    self.stats["errors"] += 1
                    for job in failed:
                        job.finished = True
                for job in failed:
                    self._deliver(job, job.next, None, err)
            with self._cv:
                self.stats["batches"] += 1

    def _chunk_done(self, job: Job, result, seconds: float) -> None:
        """Account for one synthesized chunk (``seconds`` of model time), queue the job's next one, hand the
        audio over."""
        index = job.next
        first_audio = None
        audio_seconds = len(result[0]) / self.speaker.sample_rate
        with self._cv:
            self.stats["chunks_done"] += 1
            self.stats["audio_seconds"] += audio_seconds
            job.next += 1
            if job.first_audio_at is None:
                job.first_audio_at = time.monotonic()
                first_audio = job.first_audio_at - job.since
            job.audio_seconds += audio_seconds
            if job.cancelled:
                self._retire_cancelled(job)
            elif job.remaining and self.ahead is not None and job.next >= job.taken + self.ahead:
                job.parked = True  # its consumer is behind: wait until it takes a chunk
                self._parked.add(job)
            elif job.remaining:
                self._push(job)
                self._cv.notify()
            else:
                job.finished = True
                self.stats["requests_done"] += 1
        if self.observer is not None:
            self.observer.observe_chunk(seconds)
            if first_audio is not None:
                self.observer.observe_first_audio(first_audio)
        if not job.cancelled:
            self._deliver(job, index, result, None)
