"""Does a prompt fit the evaluated model's context? One answer for every task that checks it.

Prompts are counted when their items are scored. A count made while lm-eval evaluates (``model``: its
hf or vllm model) takes that model's own tokenizer and ``max_length``, loading nothing. Otherwise the
tokenizer ``--model_args`` names (``tokenizer``, else ``pretrained``; lm-eval passes them to
``custom_dataset`` loaders) is loaded, with the limit lm-eval's HF backend would use: ``max_length``
(vLLM: ``max_model_len``) if given, else the model config's (a multimodal config's text part first)
``n_positions`` / ``max_position_embeddings`` / ``n_ctx``, else the tokenizer's ``model_max_length``,
else 2048; a ``gguf_file`` is read for both. Without a tokenizer (an API model, offline) the count is
an estimate of 4 characters per token and every ``method`` string says so. Special tokens are counted
as lm-eval adds them (a Llama tokenizer's BOS, unless ``add_bos_token=False``); chat-template tokens
are not.
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


# what a count outside lm-eval's evaluate loads a tokenizer by (hf and vllm model_args)
COUNT_SETTINGS = ("tokenizer", "pretrained", "gguf_file", "max_length", "max_model_len", "add_bos_token")


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
    """The key a text's count is kept under (in memory, in the cache files, in what lm-eval encoded)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]


class TaskFit:
    """A task's ``ContextFit`` for the model being evaluated and the budget it generates with: built at the
    first count, built again when the same task object is evaluated with another model or budget (lm-eval's
    ``evaluate`` called twice with it), so counts and warnings follow the model actually run."""

    def __init__(self, model_args: Mapping[str, Any], cache_dir: Path | None = None) -> None:
        self.settings = count_settings(model_args)
        self.cache_dir = cache_dir
        self.fit: ContextFit | None = None
        self._for: tuple[Any, int] | None = None

    def get(self, model: Any, max_gen_toks: int, encoded: Mapping[str, int] | None = None) -> tuple[ContextFit, bool]:
        """(the fit, whether it was built by this call). ``encoded``: the lengths ``model`` encoded itself."""
        if self.fit is not None and self._for is not None:
            held, budget = self._for
            if budget == int(max_gen_toks) and _same_model(held, model):
                return self.fit, False
        self.fit = ContextFit(self.settings, max_gen_toks, self.cache_dir, model, encoded)
        self._for = (_model_ref(model), int(max_gen_toks))
        return self.fit, True


# --- a task's prompts, counted when its items are scored -------------------------------------------
#
# Counting when an item is scored, not when the data set is built: a --limit 10 run counts 10 prompts, with the
# evaluated model's tokenizer (lm-eval's evaluate runs by then). A task's counter is found by the task's name,
# which is all a doc carries (it enters lm-eval's doc hash, so no load-order number): the newest counter of that
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

    def use(self, model: Any, budget: int | None = None, encoded: Mapping[str, int] | None = None) -> bool:
        """Set ``fit`` for ``model`` (the model being evaluated, or None) and the budget lm-eval generates with
        (else the task's); True when it changed (the first count, or the task evaluated again with another model:
        its own warning)."""
        self.fit, built = self.task_fit.get(model, self.budget if budget is None else int(budget), encoded)
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


def _model_ref(model: Any) -> Any:
    # a weak reference: the task must not keep a multi-GB model alive after its run (an id where none can be made)
    if model is None:
        return None
    try:
        return weakref.ref(model)
    except TypeError:
        return id(model)


def _same_model(held: Any, model: Any) -> bool:
    if held is None or model is None:
        return held is None and model is None
    return held() is model if isinstance(held, weakref.ref) else held == id(model)


class ContextFit:
    """The evaluated model's tokenizer and context limit, and ``max_gen_toks`` reserved for the answer."""

    add_special_tokens = True  # as lm-eval encodes a prompt: the tokenizer's special tokens unless add_bos_token=False

    def __init__(
        self,
        model_args: Mapping[str, Any],
        max_gen_toks: int,
        cache_dir: Path | None = None,
        model: Any = None,
        encoded: Mapping[str, int] | None = None,
    ) -> None:
        self.max_gen_toks = int(max_gen_toks)
        self.tokenizer = None
        self.encoded: Mapping[str, int] = {}  # text digest -> tokens, as the evaluated model encoded them
        self.cache_file: Path | None = None
        self._counted: dict[str, int] = {}  # without a cache file: this object's counts
        explicit = model_args.get("max_length") or model_args.get("max_model_len")  # hf / vllm model_args
        self.limit = int(explicit) if explicit else None
        name = model_args.get("tokenizer") or model_args.get("pretrained")
        gguf = model_args.get("gguf_file")
        own = _model_tokenizer(model)
        if own is not None:
            # what lm-eval cuts the prompt with: its tokenizer (a GGUF's too), max_length (model_args included),
            # and the special tokens it adds (add_bos_token, else the tokenizer's own: a Llama tokenizer's BOS)
            self.tokenizer, self.limit = own, int(model.max_length)
            self.add_special_tokens = _flag(getattr(model, "add_bos_token", None))
            self.encoded = encoded or {}
            name = getattr(own, "name_or_path", None) or (name if isinstance(name, str) else None)
        elif name:
            self.add_special_tokens = _flag(model_args.get("add_bos_token"))
            try:
                self.tokenizer, limit = _load_tokenizer(
                    str(name),
                    str(model_args.get("pretrained") or name),
                    str(gguf) if gguf else None,
                    self.limit is None,
                )
                self.limit = self.limit if self.limit is not None else limit
            except Exception as exc:  # an API model's name, offline: fall back to the labelled estimate
                log.warning(
                    "medeval: cannot load tokenizer %r (%s); estimating prompt length", name, type(exc).__name__
                )
                self.tokenizer = None
        if self.tokenizer is not None:
            self.method = (
                f"tokenizer {Path(str(name or type(self.tokenizer).__name__)).name}, limit {self.limit} incl. "
                f"{self.max_gen_toks} generated"
            )
            if cache_dir is not None and name:
                # a GGUF's tokenizer is read from the .gguf, which small_files_only leaves out: its name joins the key
                fingerprint = model_fingerprint(str(name), small_files_only=True) + (f"\0{gguf}" if gguf else "")
                fingerprint += "" if self.add_special_tokens else "\0no special tokens"
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
            # what the evaluated model's lm-eval backend encoded itself (the same count) is not encoded again
            new = {k: self.encoded[k] for k, _ in todo if k in self.encoded}
            rest = [(k, p) for k, p in todo if k not in new]
            new.update(zip((k for k, _ in rest), self._tokenize([p for _, p in rest]) if rest else []))
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
        # special tokens as lm-eval's HF backend adds them: none to a text that already starts with the BOS token
        bos = getattr(self.tokenizer, "bos_token", None) if self.add_special_tokens else None
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


@functools.lru_cache(maxsize=4)
def _load_tokenizer(name: str, pretrained: str, gguf: str | None, with_limit: bool) -> tuple[Any, int | None]:
    """A tokenizer (and its model's context) loaded once per process: each task of a group asks for it, and a
    GGUF's takes seconds to read."""
    from transformers import AutoConfig, AutoTokenizer

    extra = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(name, **extra)
    limit = _config_limit(AutoConfig.from_pretrained(pretrained, **extra), tokenizer) if with_limit else None
    return tokenizer, limit


def _model_tokenizer(model: Any) -> Any | None:
    """The evaluated model's transformers tokenizer, when it has one and a context limit."""
    tokenizer = getattr(model, "tokenizer", None) if model is not None else None
    if tokenizer is None or not isinstance(getattr(model, "max_length", None), int):
        return None
    from transformers import PreTrainedTokenizerBase

    return tokenizer if isinstance(tokenizer, PreTrainedTokenizerBase) else None


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
