"""Does a prompt fit the evaluated model's context? One answer for every task that checks it.

Prompts are counted when their items are scored, with what the lm-eval task object holds then (read
through lm-eval's own channels, nothing of lm-eval replaced): the budget is its config's
``generation_kwargs["max_gen_toks"]`` (``--gen_kwargs`` included, which lm-eval applies after loading)
and the model settings are its config's ``metadata``, into which lm-eval's command line (and
``simple_evaluate`` building its own TaskManager) merges ``--model_args``. The tokenizer they name
(``tokenizer``, else ``pretrained``; with ``gguf_file``, ``revision``, ``trust_remote_code`` and
``add_bos_token`` as lm-eval's HF backend loads it) is loaded once per process, with the limit that
backend would use: ``max_length`` (vLLM: ``max_model_len``) if given, else the model config's (a
multimodal config's text part first) ``n_positions`` / ``max_position_embeddings`` / ``n_ctx``, else the
tokenizer's ``model_max_length``, else 2048. Without a name (a model object handed to
``simple_evaluate`` in Python, an API model) or a loadable tokenizer (offline) the count is an estimate
of 4 characters per token and every ``method`` string says so. Special tokens are counted as lm-eval
adds them (a Llama tokenizer's BOS, unless ``add_bos_token=False``); chat-template tokens are not.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import itertools
import json
import logging
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from medeval_metrics.errors import MedevalDataError
from medeval_metrics.files import exclusive_lock, model_fingerprint
from medeval_metrics.safe_files import atomic_write_text

log = logging.getLogger("medeval_metrics.context_fit")
DEFAULT_LIMIT = 2048  # lm-eval's HFLM default when the model declares no length
_NO_LIMIT = 10**12  # transformers' "no maximum" sentinel for model_max_length is larger than this


# the model_args a count loads a tokenizer and takes a limit by (hf and vllm), as lm-eval merges them into metadata
COUNT_SETTINGS = (
    "tokenizer",
    "pretrained",
    "gguf_file",
    "revision",
    "trust_remote_code",
    "max_length",
    "max_model_len",
    "add_bos_token",
)


def count_settings(model_args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``COUNT_SETTINGS`` of ``model_args`` a task keeps: plain values only (a model object given in
    ``model_args`` would be kept alive), a path given as ``os.PathLike`` as its string."""
    kept: dict[str, Any] = {}
    for key in COUNT_SETTINGS:
        value = model_args.get(key)
        value = os.fspath(value) if isinstance(value, os.PathLike) else value
        if isinstance(value, (str, int, bool)):
            kept[key] = value
    return kept


def text_digest(text: str) -> str:
    """The key a text's count is kept under (in memory and in the cache files)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]


class TaskFit:
    """A task's ``ContextFit`` for the model settings and budget of the run: built at the first count, built
    again when they change (the same task object evaluated again after its metadata or ``generation_kwargs``
    changed), so counts and warnings follow what was run. ``model_args``: the loader's, for a count made
    where no lm-eval task is alive (a loader called directly)."""

    def __init__(self, model_args: Mapping[str, Any], cache_dir: Path | None = None) -> None:
        self.settings = count_settings(model_args)
        self.cache_dir = cache_dir
        self.fit: ContextFit | None = None
        self._for: tuple[Any, int] | None = None

    def get(self, settings: Mapping[str, Any], max_gen_toks: int) -> tuple[ContextFit, bool]:
        """(the fit for these count settings and budget, whether it was built by this call)."""
        key = (tuple(sorted(settings.items())), int(max_gen_toks))
        if self.fit is not None and self._for == key:
            return self.fit, False
        self.fit = ContextFit(settings, max_gen_toks, self.cache_dir)
        self._for = key
        return self.fit, True


# --- a task's prompts, counted when its items are scored -------------------------------------------
#
# Counting when an item is scored, not when the data set is built: a --limit 10 run counts 10 prompts, with the
# model settings and budget the lm-eval task holds by then. A task's counter is found by the task's name, which
# is all a doc carries (it enters lm-eval's doc hash, so no load-order number): the newest counter of that
# name whose lm-eval task is alive. Two live tasks of one name (a task dict that builds it twice) share the
# newer's: one YAML, so the same prompt and budget, and counts are kept by content; when it goes, the older's.
_COUNTERS: dict[str, list[PromptCounter]] = {}
_UNNAMED = itertools.count()


class PromptCounter:
    """How one task's prompts are counted. The task's ``doc_to_text`` notes each doc whose prompt lm-eval
    renders (``note``: lm-eval renders only the items it will score); the first item scored counts them all in
    one tokenizer call (``count``), and each later item is a lookup by content (``ContextFit``).

    ``lm_task``: the lm-eval task being built (``lm_eval_compat.loading_task``), weakly held; when it goes, so
    does its counter with its noted prompts (a --predict_only run scores none). Without one (a loader called
    directly) the counter stands until another of its name is made."""

    def __init__(
        self,
        task: str,
        kind: str,
        render: Callable[[Any], str],
        task_fit: TaskFit,
        budget: int,
        lm_task: Any = None,
    ) -> None:
        self.task, self.render, self.task_fit, self.budget = task, render, task_fit, int(budget)
        self.key = task or f"{kind}#{next(_UNNAMED)}"  # only a task config without a name (a loader called directly)
        self.fit: ContextFit | None = None
        self.warned = False  # one warning per task and model: the metric counts the rest
        self._noted: dict[int, Any] = {}  # prompt hash -> the doc (lm-eval holds it in its requests anyway)
        self._counting = False
        self._task = None if lm_task is None else weakref.ref(lm_task)
        kept = [c for c in _COUNTERS.get(self.key, []) if c._task is not None and c._task() is not None]
        _COUNTERS[self.key] = [*kept, self]
        if lm_task is not None:
            weakref.finalize(lm_task, self._retire)

    def _retire(self) -> None:
        self._noted.clear()
        same = _COUNTERS.get(self.key, [])
        if self in same:
            same.remove(self)
        if not same:
            _COUNTERS.pop(self.key, None)

    @staticmethod
    def of(doc: Mapping[str, Any], field: str) -> PromptCounter | None:
        """The counter of the task loaded in this process whose name the doc carries in ``field``."""
        same = _COUNTERS.get(str(doc.get(field) or ""))
        return same[-1] if same else None

    @property
    def noted(self) -> list[Any]:
        """The docs noted and not counted yet."""
        return list(self._noted.values())

    def note(self, doc: Any, prompt: str) -> None:
        """``doc``'s ``prompt`` was rendered: one entry per prompt, however often rendered and from however many
        copies of the doc (lm-eval renders the first doc once more when it builds the task)."""
        if not self._counting:  # not the renders of a count itself (through a task prompt wrapping the pack's too)
            self._noted.setdefault(hash(prompt), doc)

    def run_settings(self) -> tuple[dict[str, Any], int]:
        """(count settings, budget) of the run, read from the lm-eval task when its items are scored: its
        config's ``metadata`` (``--model_args`` merged in by lm-eval's command line) and
        ``generation_kwargs["max_gen_toks"]`` (``--gen_kwargs`` applied). Without a live task, the loader's."""
        config = getattr(self._task() if self._task is not None else None, "config", None)
        if config is None:
            return self.task_fit.settings, self.budget
        metadata = getattr(config, "metadata", None)
        generation = getattr(config, "generation_kwargs", None)
        settings = count_settings(metadata if isinstance(metadata, Mapping) else {})
        budget = generation.get("max_gen_toks", self.budget) if isinstance(generation, Mapping) else self.budget
        return settings, int(budget)

    def use(self, budget: int | None = None) -> bool:
        """Set ``fit`` for the run (``run_settings``; ``budget`` given: that one); True when it changed (the
        first count, or the task evaluated again with other settings: its own warning)."""
        settings, run_budget = self.run_settings()
        self.fit, built = self.task_fit.get(settings, run_budget if budget is None else int(budget))
        if built:
            self.warned = False
        return built

    def count(self, doc: Any) -> int:
        """Tokens of ``doc``'s prompt (after ``use``), counting every noted prompt with it."""
        assert self.fit is not None, "PromptCounter.use comes first"
        batch = [doc, *(d for d in self._noted.values() if d is not doc)]
        self._noted.clear()
        self._counting = True
        try:
            texts = [self.render(d) for d in batch]
        finally:
            self._counting = False
        return self.fit.count(texts)[0]

    def release(self) -> None:
        """The task's data is gone: its rendered, never-scored prompts need no count."""
        self._noted.clear()


def task_prompt(task: Any, fallback: Callable[[Any], str]) -> Callable[[Any], str]:
    """What lm-eval renders as ``task``'s ``doc_to_text`` for a doc (the YAML's, or a user's override: a
    function, a Jinja template, a field), while the task lives; else (no task, or gone) ``fallback``."""
    if task is None or not callable(getattr(task, "doc_to_text", None)):
        return fallback
    ref = weakref.ref(task)  # the counter must not keep a task (and its data) alive

    def render(doc: Any) -> str:
        live = ref()
        return fallback(doc) if live is None else str(live.doc_to_text(doc))

    return render


class ContextFit:
    """The evaluated model's tokenizer and context limit, and ``max_gen_toks`` reserved for the answer."""

    add_special_tokens = True  # as lm-eval encodes a prompt: the tokenizer's special tokens unless add_bos_token=False

    def __init__(self, model_args: Mapping[str, Any], max_gen_toks: int, cache_dir: Path | None = None) -> None:
        self.max_gen_toks = int(max_gen_toks)
        self.tokenizer = None
        self.cache_file: Path | None = None
        self._counted: dict[str, int] = {}  # without a cache file: this object's counts
        explicit = model_args.get("max_length") or model_args.get("max_model_len")  # hf / vllm model_args
        self.limit = int(explicit) if explicit else None
        name = model_args.get("tokenizer") or model_args.get("pretrained")
        name = os.fspath(name) if isinstance(name, os.PathLike) else name
        # as lm-eval's HF backend: a gguf_file is where the tokenizer is read from only when no tokenizer is named
        gguf = model_args.get("gguf_file")
        tokenizer_gguf = str(gguf) if gguf and not model_args.get("tokenizer") else None
        bos = model_args.get("add_bos_token")
        revision = model_args.get("revision")
        if isinstance(name, str) and name:
            # the special tokens lm-eval adds: add_bos_token's, else the tokenizer's own (a Llama tokenizer's BOS)
            self.add_special_tokens = _flag(bos)
            try:
                self.tokenizer, limit = _load_tokenizer(
                    name,
                    str(model_args.get("pretrained") or name),
                    tokenizer_gguf,
                    str(gguf) if gguf else None,
                    self.limit is None,
                    str(revision) if revision else None,
                    _true(model_args.get("trust_remote_code")),
                    None if bos is None else _flag(bos),
                )
                self.limit = self.limit if self.limit is not None else limit
            except Exception as exc:  # an API model's name, offline: fall back to the labelled estimate
                log.warning(
                    "medeval: cannot load tokenizer %r (%s); estimating prompt length", name, type(exc).__name__
                )
                self.tokenizer = None
        if self.tokenizer is not None:
            self.method = f"tokenizer {Path(str(name)).name}, limit {self.limit} incl. {self.max_gen_toks} generated"
            if cache_dir is not None:
                # a GGUF's tokenizer is read from the .gguf, which small_files_only leaves out: its name joins the key
                fingerprint = model_fingerprint(str(name), small_files_only=True)
                fingerprint += f"\0{tokenizer_gguf}" if tokenizer_gguf else ""
                fingerprint += f"\0revision {revision}" if revision else ""
                fingerprint += "" if bos is None else ("\0bos added" if _flag(bos) else "\0no special tokens")
                key = hashlib.sha256(fingerprint.encode()).hexdigest()[:24]
                self.cache_file = Path(cache_dir) / "token_counts" / f"{key}.json"
        else:
            self.limit = self.limit or DEFAULT_LIMIT
            self.method = (
                f"estimate: characters/4 against max_length {self.limit} "
                f"({'from model_args' if explicit else 'default; pass max_length in --model_args'}), "
                f"incl. {self.max_gen_toks} generated"
            )

    def _model_limit(self, config: Any) -> int:
        return _config_limit(config, self.tokenizer)

    def fits(self, tokens: int) -> bool:
        return tokens + self.max_gen_toks <= self.limit

    def count(self, prompts: Sequence[str]) -> list[int]:
        if self.tokenizer is None:
            return [(len(p) + 3) // 4 for p in prompts]
        # Counts are kept per tokenizer (text hash -> tokens), in memory for the process and, with a cache
        # folder, on disk for later runs; new ones are written in batches and at exit. So a text counted in
        # a batch (rag.prompt_tokens) is a lookup when its item asks.
        keys = [text_digest(p) for p in prompts]
        known = self._counted if self.cache_file is None else _known_counts(self.cache_file)
        todo = sorted({k: p for k, p in zip(keys, prompts) if k not in known}.items())
        if todo:
            new = dict(zip((k for k, _ in todo), self._tokenize([p for _, p in todo])))
            known.update(new)
            if self.cache_file is not None:
                pending = _PENDING.setdefault(self.cache_file, {})
                pending.update(new)
                if len(pending) >= _FLUSH_EVERY:
                    flush_counts(self.cache_file)
        return [known[k] for k in keys]

    def _tokenize(self, prompts: Sequence[str]) -> list[int]:
        # A fast tokenizer's Rust backend counts without the offsets and Python lists that tokenizer(...) makes
        # (the same ids: transformers calls that backend; 40 RAG prompts 0.05 s instead of 0.08 s). Not while
        # the backend truncates or pads, as a checkpoint's tokenizer.json can set it to: tokenizer(...) turns
        # both off for its call (and leaves them off), the backend alone would count 16 for a 1,201-token prompt.
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        fast = getattr(backend, "encode_batch_fast", None)
        usable = fast is not None and backend.truncation is None and backend.padding is None
        # special tokens as lm-eval's HF backend adds them: none to a text that already starts with its prefix
        # token (the BOS, else the EOS)
        bos = _prefix_token(self.tokenizer) if self.add_special_tokens else None
        special = [self.add_special_tokens and not (bos and p.startswith(bos)) for p in prompts]
        counts = [0] * len(prompts)
        for flag in sorted(set(special)):
            at = [i for i, s in enumerate(special) if s == flag]
            texts = [prompts[i] for i in at]
            if usable:
                lengths = [len(encoding) for encoding in fast(texts, add_special_tokens=flag)]
            else:
                # verbose=False: counting a prompt longer than the model's limit is the point here, not a problem to
                # warn about ("Token indices sequence length is longer..."); the pack says what does not fit itself
                lengths = [
                    len(ids) for ids in self.tokenizer(texts, add_special_tokens=flag, verbose=False)["input_ids"]
                ]
            for i, n in zip(at, lengths):
                counts[i] = n
        return counts


def _flag(value: Any) -> bool:
    """lm-eval's ``add_bos_token``: None means the tokenizer's own setting (special tokens added)."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no")
    return True if value is None else bool(value)


def _true(value: Any) -> bool:
    """A yes/no model argument that is off unless given (``trust_remote_code``), as text or a bool."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _prefix_token(tokenizer: Any) -> str | None:
    """The text lm-eval's HF backend checks a prompt for before adding special tokens (its prefix token: the
    BOS, else the EOS)."""
    for attr in ("bos_token", "eos_token"):
        token = getattr(tokenizer, attr, None)
        if isinstance(token, str) and token:
            return token
    return None


def _config_limit(config: Any, tokenizer: Any) -> int:
    """The context lm-eval's HF backend resolves from a model config (a multimodal config's text part first)."""
    for source in (getattr(config, "text_config", None), config):
        for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
            if source is not None and getattr(source, attr, None):
                return int(getattr(source, attr))
    length = getattr(tokenizer, "model_max_length", None)
    if length and length < _NO_LIMIT:
        return int(length)
    return DEFAULT_LIMIT


@functools.lru_cache(maxsize=8)
def _load_tokenizer(
    name: str,
    pretrained: str,
    tokenizer_gguf: str | None,
    config_gguf: str | None,
    with_limit: bool,
    revision: str | None,
    trust_remote_code: bool,
    add_bos_token: bool | None,
) -> tuple[Any, int | None]:
    """A tokenizer (and its model's context) loaded once per process and settings, with the arguments lm-eval's
    HF backend loads it with: each task of a group asks for it, and a GGUF's takes seconds to read."""
    from transformers import AutoConfig, AutoTokenizer

    common: dict[str, Any] = {"trust_remote_code": trust_remote_code, **({"revision": revision} if revision else {})}
    extra = {"gguf_file": tokenizer_gguf} if tokenizer_gguf else {}
    if add_bos_token is not None:
        extra["add_bos_token"] = add_bos_token
    tokenizer = AutoTokenizer.from_pretrained(name, **common, **extra)
    if not with_limit:
        return tokenizer, None
    config = AutoConfig.from_pretrained(pretrained, **common, **({"gguf_file": config_gguf} if config_gguf else {}))
    return tokenizer, _config_limit(config, tokenizer)


_FLUSH_EVERY = 256
_KNOWN: dict[Path, dict[str, int]] = {}  # cache file -> counts read or made in this process
_PENDING: dict[Path, dict[str, int]] = {}  # cache file -> counts not written yet


def _read_counts(cache_file: Path) -> dict[str, int]:
    try:
        return json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _known_counts(cache_file: Path) -> dict[str, int]:
    if cache_file not in _KNOWN:
        _KNOWN[cache_file] = _read_counts(cache_file)
    return _KNOWN[cache_file]


def flush_counts(cache_file: Path | None = None) -> None:
    """Write the counts made in this process into their cache files (merged with what others wrote)."""
    for path in [cache_file] if cache_file is not None else list(_PENDING):
        pending = _PENDING.pop(path, None)
        if not pending:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with exclusive_lock(path.with_suffix(".lock")):
                merged = {**_read_counts(path), **pending}
                atomic_write_text(path, json.dumps(merged))
        except (OSError, MedevalDataError) as exc:  # an unwritable cache costs a recount next run, nothing else
            log.warning("medeval: cannot write the token-count cache %s (%s)", path, exc)


atexit.register(flush_counts)
