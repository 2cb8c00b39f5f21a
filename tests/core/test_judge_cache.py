"""The verdict cache: keys, persistence, and several processes writing at once."""

from __future__ import annotations

import multiprocessing

import pytest

from medeval_metrics.judge.cache import VerdictCache, cache_key
from medeval_metrics.judge.config import JudgeConfig

MESSAGES = [{"role": "system", "content": "rubric"}, {"role": "user", "content": "answer"}]


def test_key_depends_on_identity_rubric_and_prompt_but_not_the_key_variable():
    judge = JudgeConfig(name="a", backend="openai-chat-completions", model="gpt-4o", api_key_env="KEY_ONE")
    same_but_other_key_var = JudgeConfig(
        name="renamed", backend="openai-chat-completions", model="gpt-4o", api_key_env="KEY_TWO"
    )
    base = cache_key(judge.identity(), "v1", MESSAGES)
    assert cache_key(same_but_other_key_var.identity(), "v1", MESSAGES) == base  # same judge, same verdicts
    assert cache_key(judge.identity(), "v2", MESSAGES) != base
    assert cache_key(judge.identity(), "v1", [*MESSAGES[:1], {"role": "user", "content": "answer!"}]) != base
    for changed in (
        {"model": "gpt-4o-mini"},
        {"base_url": "http://other"},
        {"temperature": 0.5},
        {"max_tokens": 64},
        {"model_args": {"seed": 2}},
    ):
        other = JudgeConfig(**{"name": "a", "backend": "openai-chat-completions", "model": "gpt-4o", **changed})
        assert cache_key(other.identity(), "v1", MESSAGES) != base, changed


def test_values_persist_across_instances(tmp_path):
    path = tmp_path / "sub" / "cache.sqlite"
    VerdictCache(path).put("k", {"scores": {"accuracy": 3}})
    assert VerdictCache(path).get("k") == {"scores": {"accuracy": 3}}
    assert VerdictCache(path).get("missing") is None
    assert len(VerdictCache(path)) == 1


def _writer(path: str, worker: int, count: int) -> None:
    cache = VerdictCache(path)
    for i in range(count):
        cache.put(f"w{worker}-{i}", {"worker": worker, "i": i})
        cache.put("shared", {"same": "value"})  # every process writes the same key too


@pytest.mark.e2e  # starts processes: writers in separate processes are the point
def test_several_processes_write_at_once(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w, 150)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    cache = VerdictCache(path)
    assert len(cache) == 3 * 150 + 1
    assert cache.get("w2-149") == {"worker": 2, "i": 149}
    assert cache.get("shared") == {"same": "value"}


def _open_and_write(path: str, barrier, worker: int) -> None:
    barrier.wait()  # every process opens the brand-new file at the same moment
    cache = VerdictCache(path)
    for item in range(10):
        cache.put(f"item-{item}", {"worker": worker})


@pytest.mark.e2e  # starts processes: 25 trials of four processes opening one new file
def test_processes_creating_the_cache_at_once_never_fail(tmp_path):
    # Switching a new SQLite file to WAL from several processes at once can fail with "database is
    # locked" without SQLite waiting (seen in CI with two data-parallel ranks); the cache retries.
    ctx = multiprocessing.get_context("fork")
    for trial in range(25):
        path = str(tmp_path / f"cache-{trial}.sqlite")
        barrier = ctx.Barrier(4)
        workers = [ctx.Process(target=_open_and_write, args=(path, barrier, w)) for w in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [w.exitcode for w in workers] == [0, 0, 0, 0], f"trial {trial}"
        assert len(VerdictCache(path)) == 10


def test_a_new_cache_is_private_to_the_user_whatever_the_umask(tmp_path):
    # verdicts quote the judged answers (issue 32): outside `medeval run` (medeval judge, a library user's
    # lm-eval run) the cache was created 0644 in 0755 folders under the usual umask 022
    import os
    import stat

    old = os.umask(0o022)
    try:
        cache = VerdictCache(tmp_path / "new" / "deeper" / "cache.sqlite")
        cache.put("k", {"scores": {"accuracy": 3}})
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "new" / "deeper").iterdir()}
    assert modes == {"cache.sqlite": 0o600, "cache.sqlite-wal": 0o600, "cache.sqlite-shm": 0o600}
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new" / "deeper").stat().st_mode) == 0o700
    mine = tmp_path / "shared.sqlite"
    mine.touch(mode=0o640)
    os.chmod(mine, 0o640)
    VerdictCache(mine).put("k", {"scores": {"accuracy": 3}})
    assert stat.S_IMODE(mine.stat().st_mode) == 0o640  # the user's own file keeps the mode they gave it
