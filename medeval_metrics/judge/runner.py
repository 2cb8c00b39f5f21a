"""The panel scheduler: every (judge, item) verdict, concurrent, retried, cached, never silently scored.

One request budget per (judge, item): at most ``1 + max_retries + max_reasks`` requests, whatever
mix of transport failures (each retry spends one of ``max_retries``, with backoff honouring
``Retry-After``) and unusable verdicts (each re-ask spends one of ``max_reasks``) occurs. The
re-ask decision lives in one place (``_advance``), used by both drivers: API judges (one asyncio
event loop and connection pool across all judges, ``judge.transport``, at most ``concurrency``
requests in flight) and batch backends (``hf``/``vllm``, one ``generate_until`` per round).
Verdicts reach the cache through one writer thread in batched transactions, off the event loop.

A verdict that cannot be obtained is *unscored* with its reason and kind (``transport`` or
``unusable``); it is never turned into a score. Cached verdicts are reused, except an unscored one
that a later run may improve: transport failures are asked again, unusable verdicts when the
settings that produced them changed (more retries or re-asks) or ``retry_unscored`` is set.
A judge whose first ``fail_fast`` requests all fail in transport is stopped: its remaining items
are unscored at once with that reason, instead of each spending its retries.

Runs sharing a cache ask once per verdict: a run claims what it is about to ask (``judge.cache``), and
a verdict another live run has claimed is waited for and read from the cache when it is stored (then
reused as any cached verdict is, or asked if this run would ask it again); a claim whose lease ran out
(the run was killed) is taken over.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from medeval_metrics.judge.cache import LEASE_S, VerdictCache, cache_key, new_owner
from medeval_metrics.judge.client import JudgeClient, TransportFailure
from medeval_metrics.judge.config import JudgeConfig, PanelConfig, url_without_userinfo
from medeval_metrics.judge.rubric import Rubric
from medeval_metrics.judge.transport import AsyncJudgeTransport
from medeval_metrics.judge.verdict import ShownObjects

log = logging.getLogger("medeval.judge")
_REPLY_KEEP = 2000  # characters of the judge's last reply kept for auditing
_CACHE_BATCH = 64  # verdicts per cache transaction, at most
_CACHE_FLUSH_S = 0.25  # and at least this often: a killed run loses a quarter second of verdicts
CLAIM_POLL_S = 0.2  # how often a run waiting for another run's verdicts looks for them


@dataclass(frozen=True)
class JudgeItem:
    question: str
    reference: str
    answer: str


class _Shown:
    """An item's ``ShownObjects``, found when a reply is first read: up front, finding them for every
    item held back the first request (about 0.1-0.2 ms an item, 20-45 ms for 200 items)."""

    __slots__ = ("_objects", "answer", "messages")

    def __init__(self, messages: list[dict[str, str]], answer: str) -> None:
        self.messages, self.answer, self._objects = messages, answer, None

    def get(self) -> ShownObjects:
        if self._objects is None:
            self._objects = ShownObjects.of(self.messages, self.answer)
        return self._objects


@dataclass
class _Job:
    index: int
    judge: JudgeConfig
    item: JudgeItem
    shown_of: _Shown
    key: str
    conversation: list[dict[str, str]]
    requests: int = 0
    retries: int = 0
    reasks: int = 0
    reply: str | None = None
    verdict: dict[str, Any] | None = None

    @property
    def shown(self) -> ShownObjects:
        return self.shown_of.get()


@dataclass
class _JudgeHealth:
    """Per judge: requests answered and transport failures, to stop a judge that is plainly down."""

    answered: int = 0
    failed: int = 0
    stopped: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_coroutine(coroutine: Any) -> Any:
    """Run ``coroutine`` to completion from synchronous code, also where an event loop is already
    running in this thread (a notebook): then in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def short_reason(verdict: dict[str, Any]) -> str:
    """The unscored reason without its counts, for tallies ("HTTP 500", "no JSON object in reply ...")."""
    reason = str(verdict.get("unscored_reason") or "")
    if reason.startswith("unusable verdict after "):
        return reason.split(": ", 1)[-1][:60]
    return reason.split(" after ", 1)[0].split(" (", 1)[0][:60]


class PanelRunner:
    def __init__(
        self,
        panel: PanelConfig,
        rubric: Rubric,
        clients: dict[str, JudgeClient] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        retry_unscored: bool = False,
    ) -> None:
        self.panel, self.rubric, self.sleep, self.retry_unscored = panel, rubric, sleep, retry_unscored
        self.load_failures: dict[str, str] = {}  # judge name -> why its model could not be loaded
        self.clients = clients or self._build_clients(panel)
        self.cache = VerdictCache(panel.cache) if panel.cache else None
        self._rng = random.Random(0)
        self._rng_lock = threading.Lock()
        self._health = {j.name: _JudgeHealth() for j in panel.judges}
        self.rubric_key = {
            "name": rubric.name,
            "hash": rubric.content_hash(),
            "require_answer_id": panel.require_answer_id,
        }

    def _build_clients(self, panel: PanelConfig) -> dict[str, JudgeClient]:
        """Each judge's backend. A judge whose model cannot be loaded (out of memory, a missing folder) is
        reported and leaves its items unscored: this runs after the evaluated model answered, and a
        traceback here would lose those answers."""
        from medeval_metrics.data import MedevalDataError
        from medeval_metrics.redact import redact_text

        clients = {}
        for judge in panel.judges:
            try:
                clients[judge.name] = JudgeClient(judge, panel)
            except MedevalDataError:
                raise  # a configuration problem, which the pre-run checks report first
            except Exception as exc:
                message = str(exc)
                if judge.base_url:  # the library's message may quote the backend's arguments: no URL credentials
                    message = message.replace(judge.base_url, url_without_userinfo(judge.base_url) or "")
                reason = redact_text(f"judge model could not be loaded ({type(exc).__name__}: {message})")[:300]
                log.error("judge %s: %s; its items are unscored.", judge.name, reason)
                self.load_failures[judge.name] = reason
        return clients

    # ------------------------------------------------------------------ verdict records
    def _verdict(self, job: _Job, **fields: Any) -> dict[str, Any]:
        record = {
            "judge": job.judge.name,
            "rubric": self.rubric.name,
            "rubric_version": self.rubric.version,
            "rubric_hash": self.rubric_key["hash"],
            "scores": None,
            "reasons": {},
            "id_echoed": None,
            "unscored_reason": None,
            "unscored_kind": None,
            "requests": job.requests,
            "reply": (job.reply or "")[:_REPLY_KEEP] if job.reply is not None else None,
            "cached": False,
            "settings": {"max_retries": self.panel.max_retries, "max_reasks": self.panel.max_reasks},
        }
        record.update(fields)
        return record

    def _reread(self, job: _Job, hit: dict[str, Any] | None) -> dict[str, Any] | None:
        """A cached verdict read again from its stored reply by the current parser, so that a reading
        fixed since it was cached applies to it (a reply once unusable may now count) and a stale
        reading never counts (a score the current parser refuses is asked again: None). A reply stored
        cut short (``_REPLY_KEEP``) or a transport failure is used as stored."""
        reply = None if hit is None else hit.get("reply")
        if not isinstance(reply, str) or len(reply) >= _REPLY_KEEP or hit.get("unscored_kind") == "transport":
            return hit
        parsed = self.rubric.parse(reply, job.item.answer, job.shown, require_answer_id=self.panel.require_answer_id)
        if parsed.ok:
            return {
                **hit,
                "scores": parsed.scores,
                "reasons": parsed.reasons,
                "id_echoed": parsed.id_echoed,
                "unscored_reason": None,
                "unscored_kind": None,
            }
        return None if hit.get("scores") else hit

    def _reusable(self, hit: dict[str, Any]) -> bool:
        if hit.get("scores"):
            return True  # a good verdict is never asked again
        if self.retry_unscored or hit.get("unscored_kind") != "unusable":
            return False  # transport failures (and pre-v2 records) are asked again
        return hit.get("settings") == {"max_retries": self.panel.max_retries, "max_reasks": self.panel.max_reasks}

    # ------------------------------------------------------------------ the one re-ask decision
    def _advance(self, job: _Job, outcome: str | None | TransportFailure) -> bool:
        """Record one ask's outcome; True while the job should be asked again (a re-ask turn added)."""
        if isinstance(outcome, TransportFailure):
            job.verdict = self._verdict(job, unscored_reason=outcome.reason, unscored_kind="transport")
            return False
        job.reply = outcome
        parsed = self.rubric.parse(outcome, job.item.answer, job.shown, require_answer_id=self.panel.require_answer_id)
        if parsed.ok:
            job.verdict = self._verdict(job, scores=parsed.scores, reasons=parsed.reasons, id_echoed=parsed.id_echoed)
            return False
        if job.reasks < self.panel.max_reasks:
            job.reasks += 1
            job.conversation = [
                *job.conversation,
                {"role": "assistant", "content": outcome or ""},
                self.rubric.reask_message(parsed.error or "unusable"),
            ]
            return True
        job.verdict = self._verdict(
            job,
            unscored_kind="unusable",
            unscored_reason=f"unusable verdict after {job.reasks + 1} ask(s): {parsed.error}",
        )
        return False

    # ------------------------------------------------------------------ API driver
    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, 300.0)
        with self._rng_lock:
            jitter = self._rng.uniform(0.5, 1.0)
        return min(self.panel.backoff_max, self.panel.backoff_base * (2**attempt)) * jitter

    def _note(self, judge: str, failed: bool) -> None:
        health = self._health[judge]
        with health.lock:
            if failed:
                health.failed += 1
            else:
                health.answered += 1
            limit = self.panel.fail_fast
            if limit and failed and health.answered == 0 and health.failed >= limit and health.stopped is None:
                health.stopped = f"judge stopped: its first {health.failed} requests all failed"
                log.error(
                    "judge %s: its first %d requests all failed in transport; stopping it (check its base_url, "
                    "key and whether it is up). Its remaining items are unscored.",
                    judge,
                    health.failed,
                )

    async def _pause(self, seconds: float) -> None:
        if self.sleep is time.sleep:
            await asyncio.sleep(seconds)
        else:  # an injected clock (tests): it records the wait, the loop only yields
            self.sleep(seconds)
            await asyncio.sleep(0)

    async def _ask_api(self, job: _Job, transport: AsyncJudgeTransport) -> str | None | TransportFailure:
        """One ask (with its transport retries, from the job's budget): the reply, or the failure."""
        name = job.judge.name
        health = self._health[name]
        attempts = 1 + self.panel.max_retries - job.retries  # this ask's share of the budget
        for attempt in range(attempts):
            if health.stopped:
                return TransportFailure(f"{health.stopped} ({job.requests} request(s) for this item)", retryable=False)
            job.requests += 1
            try:
                reply = await transport.request(name, job.conversation)
            except TransportFailure as failure:
                if failure.reason != "HTTP 429":  # rate limits say the judge is up: never a reason to stop it
                    self._note(name, failed=True)
                if not failure.retryable or attempt == attempts - 1:
                    return TransportFailure(f"{failure.reason} after {job.requests} request(s)", retryable=False)
                job.retries += 1
                await self._pause(self._backoff(attempt, failure.retry_after))
                continue
            self._note(name, failed=False)
            return reply
        raise AssertionError("unreachable: the last attempt returns")

    async def _run_api_jobs(self, jobs: list[_Job], finish: Callable[[_Job], None]) -> None:
        """``concurrency`` workers across all judges, each with at most one request in flight (a job's
        transport retries included); one reader reads the replies. A worker hands its reply to the reader
        and takes the next job at once: reading a reply (the verdict rules, 0.1-0.2 ms) no longer holds
        back the next request, and the reader lets the loop run once before each reply, so the requests
        just started are written first. A job to be asked again (a re-ask) goes to the front of the queue."""
        queue: deque[_Job] = deque(jobs)
        replies: deque[tuple[_Job, str | None | TransportFailure]] = deque()
        open_jobs = [len(jobs)]
        idle: deque[asyncio.Future[None]] = deque()  # workers with nothing to send, until a re-ask or the end
        reply_ready = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def worker(transport: AsyncJudgeTransport) -> None:
            while open_jobs[0]:
                if not queue:  # the open jobs are in flight or being read: one may come back as a re-ask
                    wake = loop.create_future()
                    idle.append(wake)
                    await wake
                    continue
                job = queue.popleft()
                replies.append((job, await self._ask_api(job, transport)))
                reply_ready.set()

        def wake(count: int | None) -> None:
            while idle and (count is None or count > 0):
                waiting = idle.popleft()
                if not waiting.done():
                    waiting.set_result(None)
                    count = None if count is None else count - 1

        async def reader() -> None:
            while open_jobs[0]:
                if not replies:
                    reply_ready.clear()
                    await reply_ready.wait()
                    continue
                await asyncio.sleep(0)  # first the loop's other work: the requests workers just sent go out
                job, outcome = replies.popleft()
                if self._advance(job, outcome):
                    queue.appendleft(job)
                    wake(1)
                else:
                    finish(job)
                    open_jobs[0] -= 1
                    if not open_jobs[0]:
                        wake(None)  # nothing left: the idle workers stop

        async with AsyncJudgeTransport(self.clients, self.panel.concurrency) as transport:
            workers = []
            try:
                # One loop pass between starts. Started all at once, every worker's first request
                # goes through each step (payload, connect, send) in lockstep, so all of them leave
                # together only once the whole first round is prepared, their replies come back
                # together, and each round's replies queue behind one another for the client's
                # CPU (at c128 about 0.2 ms x 128 per round). Staggered, each request leaves as
                # soon as it is ready and the replies stay spread out; every worker is still
                # started within a few milliseconds.
                workers.append(asyncio.ensure_future(reader()))
                for _ in range(min(self.panel.concurrency, len(jobs))):
                    workers.append(asyncio.ensure_future(worker(transport)))
                    await asyncio.sleep(0)
                await asyncio.gather(*workers)
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    # ------------------------------------------------------------------ batch driver
    def _run_batch(self, jobs: list[_Job]) -> None:
        client = self.clients[jobs[0].judge.name]
        open_jobs = list(jobs)
        while open_jobs:
            for job in open_jobs:
                job.requests += 1
            try:
                replies: list[Any] = client.generate_batch([job.conversation for job in open_jobs])
            except Exception as exc:
                replies = [TransportFailure(f"generation failed ({type(exc).__name__})", retryable=False)] * len(
                    open_jobs
                )
            open_jobs = [job for job, reply in zip(open_jobs, replies) if self._advance(job, reply)]

    # ------------------------------------------------------------------ the panel
    def judge(self, items: Sequence[JudgeItem], progress: bool = True) -> list[dict[str, dict[str, Any]]]:
        """Per item, ``{judge name: verdict}``; cached verdicts are reused and fresh ones stored."""
        from tqdm import tqdm

        results: list[dict[str, dict[str, Any]]] = [{} for _ in items]
        jobs: list[_Job] = []
        for index, item in enumerate(items):
            messages = self.rubric.messages(item.question, item.reference, item.answer)
            shown = _Shown(messages, item.answer)
            for judge in self.panel.judges:
                key = cache_key(judge.identity(), self.rubric_key, messages)
                jobs.append(_Job(index, judge, item, shown, key, list(messages)))
        hits = self.cache.get_many([job.key for job in jobs]) if self.cache is not None else {}
        to_ask = []
        for job in jobs:
            hit = self._reread(job, hits.get(job.key))
            if hit is not None and self._reusable(hit):
                results[job.index][job.judge.name] = {**hit, "judge": job.judge.name, "cached": True, "requests": 0}
            else:
                to_ask.append(job)

        bar = tqdm(total=len(to_ask), desc="Judging", disable=not progress or not to_ask)
        unscored: Counter[str] = Counter()
        pending: list[tuple[str, dict[str, Any]]] = []
        last_flush = [time.monotonic()]
        writer = CacheWriter(self.cache, self.sleep) if self.cache is not None else None

        def finish(job: _Job) -> None:
            verdict = job.verdict or self._verdict(job, unscored_reason="no verdict", unscored_kind="transport")
            results[job.index][job.judge.name] = verdict
            pending.append((job.key, {k: v for k, v in verdict.items() if k not in ("cached", "requests")}))
            if len(pending) >= _CACHE_BATCH or time.monotonic() - last_flush[0] >= _CACHE_FLUSH_S:
                self._flush(writer, pending)
                last_flush[0] = time.monotonic()
            if not verdict.get("scores"):
                unscored[short_reason(verdict)] += 1
                bar.set_postfix_str(
                    "unscored: " + ", ".join(f"{n} {r}" for r, n in unscored.most_common(3)), refresh=False
                )
            bar.update(1)

        not_loaded = [job for job in to_ask if job.judge.name in self.load_failures]
        to_ask = [job for job in to_ask if job.judge.name not in self.load_failures]
        claims = _Claims(self.cache) if self.cache is not None and to_ask else None
        if writer is not None and claims is not None:
            writer.owner = claims.owner  # each stored verdict ends this run's claim on it

        def take(job: _Job, hit: dict[str, Any]) -> None:
            """A verdict another run stored while this one was judging: used as a cached one."""
            results[job.index][job.judge.name] = {**hit, "judge": job.judge.name, "cached": True, "requests": 0}
            bar.update(1)

        try:
            for job in not_loaded:
                job.verdict = self._verdict(
                    job, unscored_reason=self.load_failures[job.judge.name], unscored_kind="transport"
                )  # asked again next run
                finish(job)
            waiting: list[_Job] = []  # jobs whose key another live run has claimed
            while to_ask or waiting:
                if to_ask:
                    mine, theirs = claims.claim(to_ask) if claims is not None else (to_ask, [])
                    if theirs and not waiting:
                        log.info(
                            "judge cache %s: %d verdict(s) are being asked for by another run; waiting for them.",
                            self.cache.path if self.cache is not None else "",
                            len(theirs),
                        )
                    waiting += theirs
                    if claims is not None and claims.working:
                        mine = self._not_stored_since(mine, take)
                    self._ask(mine, finish)
                    to_ask = []
                if waiting and pending:  # what this run holds is stored before it waits: others may wait on it
                    self._flush(writer, pending)
                    last_flush[0] = time.monotonic()
                if waiting:
                    to_ask, waiting = self._look_for(waiting, claims, take)
                    if waiting and not to_ask:
                        time.sleep(CLAIM_POLL_S)
        finally:
            self._flush(writer, pending)
            bar.close()
            if writer is not None:
                writer.close()  # waits for every batch; what could not be stored is one warning
            if claims is not None:
                claims.close()  # after the verdicts are stored: a waiting run finds them, not a free key
        return results

    def _ask(self, jobs: list[_Job], finish: Callable[[_Job], None]) -> None:
        api_jobs = [job for job in jobs if self.clients[job.judge.name].is_api]
        batch_jobs: dict[str, list[_Job]] = {}
        for job in jobs:
            if not self.clients[job.judge.name].is_api:
                batch_jobs.setdefault(job.judge.name, []).append(job)
        if api_jobs:
            run_coroutine(self._run_api_jobs(api_jobs, finish))
        for judge_jobs in batch_jobs.values():
            self._run_batch(judge_jobs)
            for job in judge_jobs:
                finish(job)

    def _usable(self, job: _Job, stored: dict[str, Any] | None) -> dict[str, Any] | None:
        hit = self._reread(job, stored)
        return hit if hit is not None and self._reusable(hit) else None

    def _not_stored_since(self, jobs: list[_Job], take: Callable[[_Job, dict[str, Any]], None]) -> list[_Job]:
        """The claimed jobs still to ask: a verdict another run stored between this run's first look and
        its claim (its claim ended with the write) is taken instead."""
        assert self.cache is not None
        try:
            stored = self.cache.get_many([job.key for job in jobs])
        except (sqlite3.Error, OSError):
            return jobs
        left = []
        for job in jobs:
            hit = self._usable(job, stored.get(job.key)) if job.key in stored else None
            if hit is not None:
                take(job, hit)
            else:
                left.append(job)
        return left

    def _look_for(
        self, waiting: list[_Job], claims: _Claims | None, take: Callable[[_Job, dict[str, Any]], None]
    ) -> tuple[list[_Job], list[_Job]]:
        """One look at the verdicts other runs are asking for: (jobs to ask now, jobs still waited for).
        A stored verdict this run would reuse is taken; a key whose claim ended or expired with no such
        verdict (the other run failed, was killed, or stored a verdict this run would ask again) is asked."""
        assert self.cache is not None and claims is not None
        keys = [job.key for job in waiting]
        try:
            stored, held = self.cache.get_many(keys), self.cache.claims(keys)
        except (sqlite3.Error, OSError):
            return waiting, []  # the cache cannot be read: ask them unclaimed
        now = time.time()
        ask, wait = [], []
        for job in waiting:
            hit = self._usable(job, stored.get(job.key)) if job.key in stored else None
            owner, expires = held.get(job.key, (claims.owner, 0.0))
            if hit is not None:
                take(job, hit)
            elif owner != claims.owner and expires > now:
                wait.append(job)
            else:
                ask.append(job)
        return ask, wait

    @staticmethod
    def _flush(writer: CacheWriter | None, pending: list[tuple[str, dict[str, Any]]]) -> None:
        if writer is not None and pending:
            writer.put_many(list(pending))
        pending.clear()


class _Claims:
    """One run's claims in the cache (``judge.cache``): made before its asks, renewed every third of a lease
    from a thread of their own while the run lives, ended when it is done. Best effort: where the cache
    cannot be claimed in (locked), the run asks unclaimed, as before claims existed."""

    def __init__(self, cache: VerdictCache) -> None:
        self.cache, self.owner = cache, new_owner()
        self.working = True
        self._made = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def claim(self, jobs: list[_Job]) -> tuple[list[_Job], list[_Job]]:
        """(the jobs this run asks, the jobs another live run is asking)."""
        if not self.working:
            return jobs, []
        try:
            held = self.cache.claim([job.key for job in jobs], self.owner)
        except (sqlite3.Error, OSError) as exc:
            log.debug("judge cache %s: no claims (%s); asking unclaimed.", self.cache.path, type(exc).__name__)
            self.working = False
            return jobs, []
        self._made = True
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="medeval-judge-claims", daemon=True)
            self._renewer.start()
        return [job for job in jobs if job.key not in held], [job for job in jobs if job.key in held]

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_S / 3):
            try:
                self.cache.renew(self.owner)
            except (sqlite3.Error, OSError):
                pass  # the next renewal tries again; a lease that runs out only lets another run ask too

    def close(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self._made:
            try:
                self.cache.release(self.owner)
            except (sqlite3.Error, OSError):
                pass  # the leases run out by themselves


CACHE_WRITE_ATTEMPTS = 3  # per batch, with CACHE_RETRY_S, 2 x CACHE_RETRY_S between attempts
CACHE_RETRY_S = 0.5
# Each cache that could not store every verdict in this process: "path: N verdicts not stored (reason)".
# ``medeval run`` and ``medeval judge`` read it to exit with CACHE_FAILED_EXIT after writing the results.
cache_failures: list[str] = []
CACHE_FAILED_EXIT = 4


class CacheWriter:
    """One thread that writes verdict batches to the cache, in order, so that SQLite's commits never
    hold up the requests.

    A batch that cannot be written (another process holds the write lock past SQLite's busy timeout,
    a full disk) is tried ``CACHE_WRITE_ATTEMPTS`` times; then it and every later batch are kept in
    memory and tried once more together at ``close``. What still fails is one warning and an entry in
    ``cache_failures``: the run goes on, its verdicts are in its results, only a later run re-asks them."""

    def __init__(self, cache: VerdictCache, sleep: Callable[[float], None] = time.sleep) -> None:
        self.cache, self.sleep = cache, sleep
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medeval-judge-cache")
        self._unwritten: list[tuple[str, dict[str, Any]]] = []
        self._reason: str | None = None
        self.owner: str | None = None  # the run whose claims the stored verdicts end

    def put_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        self._pool.submit(self._write, rows)

    def _write(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        if self._reason is not None:  # the cache is failing: keep the batch for the last try
            self._unwritten += rows
            return
        reason = None
        for attempt in range(CACHE_WRITE_ATTEMPTS):
            try:
                self.cache.put_many(rows, self.owner)
                return
            except Exception as exc:  # any error: uncaught in this thread, it would lose the batch unseen
                reason = f"{type(exc).__name__}: {exc}"[:120]
                if attempt < CACHE_WRITE_ATTEMPTS - 1:
                    self.sleep(CACHE_RETRY_S * 2**attempt)
        self._reason = reason
        self._unwritten += rows

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if not self._unwritten:
            return
        try:
            self.cache.put_many(self._unwritten, self.owner)
            return
        except Exception as exc:  # as in _write
            self._reason = f"{type(exc).__name__}: {exc}"[:120]
        failure = f"{self.cache.path}: {len(self._unwritten)} verdicts not stored ({self._reason})"
        cache_failures.append(failure)
        log.warning(
            "judge cache %s: %d verdicts could not be stored (%s); they are in this run's results, "
            "but a later run asks the judges for them again.",
            self.cache.path,
            len(self._unwritten),
            self._reason,
        )


def panel_summary(
    verdicts: Sequence[dict[str, dict[str, Any]]], judge_names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per judge: scored, unscored, the commonest unscored reason, and how often it echoed the answer id."""
    out: dict[str, dict[str, Any]] = {}
    for name in judge_names:
        mine = [row.get(name) or {} for row in verdicts]
        scored = [v for v in mine if v.get("scores")]
        reasons = Counter(short_reason(v) for v in mine if not v.get("scores"))
        echoed = [bool(v.get("id_echoed")) for v in scored if v.get("id_echoed") is not None]
        out[name] = {
            "scored": len(scored),
            "unscored": len(mine) - len(scored),
            "top_reason": reasons.most_common(1)[0][0] if reasons else None,
            "reasons": dict(reasons.most_common()),
            "id_echo_rate": (sum(echoed) / len(echoed)) if echoed else None,
        }
    return out


def summary_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for name, s in summary.items():
        line = f"judge {name}: {s['scored']} scored, {s['unscored']} unscored"
        if s["top_reason"]:
            line += f" (top reason: {s['top_reason']})"
        if s["id_echo_rate"] is not None:
            line += f"; echoed the answer id in {s['id_echo_rate']:.0%} of verdicts"
        lines.append(line)
    return lines
