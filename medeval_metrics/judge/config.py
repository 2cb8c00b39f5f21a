"""Judge panel configuration: which judges, how hard to try, where to cache, which rubric.

The panel is inline JSON or the path of a JSON/YAML judges file, given as

1. ``--metadata '{"medeval_judges": "/path/judges.yaml"}'`` on the lm-eval/medeval command line;
2. the environment variable ``MEDEVAL_JUDGES`` (reaches data-parallel ranks and ``medeval judge``);
3. ``medeval judge --judges FILE``, or ``--judge-model A --judge-model B`` flags (``panel_from_flags``).

The command line wins over the environment. A judged task's data loader resolves the panel from its
``--metadata`` (``panel_from_metadata``), checks it completely (``validate_panel``) before any
generation, keeps it in this module's registry (``register_panel``) and puts only the short key
that names it on each document (``PANEL_FIELD``): lm-eval hands a filter nothing but the documents,
and a document never carries a URL, a key variable or a path. lm-eval copies ``--metadata`` into
the results JSON, which is why a judges config may name key variables but never hold a key. Where
the pack records or prints a judge's URL, it is without its ``user:password@`` part
(``url_without_userinfo``). Shape::

    {"judges": [
        {"name": "gpt4o", "backend": "openai-chat-completions", "model": "gpt-4o",
         "api_key_env": "OPENAI_API_KEY", "temperature": 0, "max_tokens": 512},
        {"name": "local", "backend": "local-chat-completions", "model": "llama",
         "base_url": "http://127.0.0.1:8000/v1/chat/completions", "header_env": {"x-api-key": "LOCAL_KEY"}}],
     "concurrency": 32, "max_retries": 4, "max_reasks": 1, "timeout": 120,
     "cache": "~/.cache/medeval/judge_cache.sqlite", "rubric": "my_rubric.yaml", "require_answer_id": false}

A plain list is a panel with default settings. Keys are named, never given: ``api_key_env`` names
the variable holding the key (sent as ``Authorization: Bearer``), ``header_env`` maps header names to
variables; a judge without either sends no Authorization header at all. A key-looking field, a
header value, or an ``api_key_env`` that is not a variable name is refused.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from medeval_metrics.data import MedevalDataError
from medeval_metrics.settings import JUDGES, MAX_VALUE_CHARS, checked_value, env_setting, excerpt

ENV_VAR = JUDGES.name
METADATA_KEY = "medeval_judges"
# document field through which a task's loader names its panel to its filter: a key of ``register_panel``
PANEL_FIELD = "judge_panel_key"
DEFAULT_CACHE = "~/.cache/medeval/judge_cache.sqlite"
_SECRET_KEYS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization", "header", "headers"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
SECRET_MESSAGE = (
    "would put a secret in the judges config. Put the key in an environment variable and name it with "
    '"api_key_env": "MY_JUDGE_KEY" (or, for a header such as x-api-key, with "header_env", which maps each '
    "header name to a variable name, e.g. x-api-key to MY_VAR)."
)  # worded so that the redaction of console output leaves the example readable
# lm-eval backends that send HTTP requests to a URL the judge must be given
NEEDS_BASE_URL = {"local-completions", "local-chat-completions"}
# lm-eval backends that load the judge model in this process; lm-eval's HFLM defaults to CUDA
LOCAL_DEVICE_BACKENDS = {"hf", "huggingface"}


def judge_device(judge: JudgeConfig, cuda_available: Any = None) -> str | None:
    """The device a local (``hf``) judge loads on: its ``model_args.device``, else CUDA where torch sees a
    GPU and the CPU otherwise (lm-eval's own default, CUDA, fails only after the evaluated model answered).
    None for other backends."""
    if judge.backend not in LOCAL_DEVICE_BACKENDS:
        return None
    device = judge.model_args.get("device")
    if device:
        return str(device)
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available
    return "cuda" if cuda_available() else "cpu"


def device_problem(judge: JudgeConfig, cuda_available: Any = None) -> str | None:
    """A local judge asked to load on CUDA where torch has none: said before any generation."""
    device = str(judge.model_args.get("device") or "") if judge.backend in LOCAL_DEVICE_BACKENDS else ""
    if not device.startswith("cuda"):
        return None
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available
    if cuda_available():
        return None
    return (
        f"judge {judge.name}: model_args device {device!r}, but torch sees no CUDA GPU on this machine; "
        'set "device": "cpu" in its model_args (or leave device out: the CPU is used when there is no GPU).'
    )


@dataclass(frozen=True)
class JudgeConfig:
    name: str
    backend: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    model_args: dict[str, Any] = field(default_factory=dict)
    header_env: dict[str, str] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """Everything that changes what this judge says (never the key): the cache key's judge part."""
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "model_args": {k: self.model_args[k] for k in sorted(self.model_args)},
        }

    def describe(self) -> dict[str, Any]:
        """What the results say about this judge: identity (its URL without credentials) and the *names*
        of its key variables."""
        return {
            "name": self.name,
            **self.identity(),
            "base_url": url_without_userinfo(self.base_url),
            "api_key_env": self.api_key_env,
            "header_env": dict(sorted(self.header_env.items())),
        }


@dataclass(frozen=True)
class PanelConfig:
    judges: tuple[JudgeConfig, ...]
    concurrency: int = 32
    max_retries: int = 4  # transport failures per (judge, item), over all its requests
    max_reasks: int = 1  # follow-up turns after unusable verdicts, per (judge, item)
    timeout: float = 120.0  # seconds per request
    backoff_base: float = 1.0  # seconds; doubled per retry, capped at backoff_max
    backoff_max: float = 30.0
    cache: str | None = DEFAULT_CACHE  # None: no cache
    rubric: str | None = None  # a rubric YAML file replacing the task's rubric
    require_answer_id: bool = False  # count only verdicts that echo the answer's id
    fail_fast: int = 8  # a judge whose first N requests all fail in transport stops the panel (0: never)

    @property
    def judge_names(self) -> list[str]:
        return [j.name for j in self.judges]

    @property
    def max_requests(self) -> int:
        """The most requests one (judge, item) can cost: 1 + max_retries + max_reasks."""
        return 1 + self.max_retries + self.max_reasks

    def settings(self) -> dict[str, Any]:
        """The settings that shape verdicts, for the results and for deciding when to re-ask."""
        return {
            "max_retries": self.max_retries,
            "max_reasks": self.max_reasks,
            "timeout": self.timeout,
            "require_answer_id": self.require_answer_id,
            "rubric": self.rubric,
        }

    def to_json(self) -> str:
        """The panel as inline JSON (no keys exist in it to leak), e.g. to pass it on to a filter."""
        return json.dumps(
            {
                "judges": [
                    {
                        k: v
                        for k, v in (
                            ("name", j.name),
                            ("backend", j.backend),
                            ("model", j.model),
                            ("base_url", j.base_url),
                            ("api_key_env", j.api_key_env),
                            ("temperature", j.temperature),
                            ("max_tokens", j.max_tokens),
                            ("model_args", j.model_args),
                            ("header_env", j.header_env),
                        )
                        if v not in (None, {})
                    }
                    for j in self.judges
                ],
                "concurrency": self.concurrency,
                "max_retries": self.max_retries,
                "max_reasks": self.max_reasks,
                "timeout": self.timeout,
                "backoff_base": self.backoff_base,
                "backoff_max": self.backoff_max,
                "cache": self.cache,
                "rubric": self.rubric,
                "require_answer_id": self.require_answer_id,
                "fail_fast": self.fail_fast,
            },
            sort_keys=True,
        )


def url_without_userinfo(url: str | None) -> str | None:
    """``url`` without the ``user:password@`` before its host: the form in which the pack records or prints a
    judge's URL (the request itself still goes to the URL as configured)."""
    if not url or "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # unparseable (a bad IPv6 literal): drop everything between "//" and the last "@"
        return re.sub(r"//[^/?#]*@", "//", url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _urls_mapped(obj: Any, change: Any) -> Any:
    """``obj`` (JSON-like) with ``change`` applied to every string that holds a URL (``://``)."""
    if isinstance(obj, dict):
        return {key: _urls_mapped(value, change) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_urls_mapped(value, change) for value in obj]
    return change(obj) if isinstance(obj, str) and "://" in obj else obj


def _inline_panel(value: Any) -> Any:
    """A panel given inline (an object or list, or its JSON text) as parsed; None for a file's path or bad JSON."""
    if isinstance(value, str):
        if not value.strip().startswith(("{", "[")):
            return None
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, (dict, list)) else None


def panel_url_credentials(value: Any) -> bool:
    """Whether an inline panel (``--metadata medeval_judges``: an object, a list or JSON text) holds a URL with a
    ``user:password@`` part (a file's path: False, the file is the user's and no copy of it is written)."""
    panel = _inline_panel(value)
    found: list[str] = []
    _urls_mapped(panel, lambda url: found.append(url) if url_without_userinfo(url) != url else None)
    return bool(found)


def panel_as_recorded(value: Any) -> Any:
    """An inline panel with every URL's ``user:password@`` left out (the shape given: JSON text stays text)."""
    panel = _inline_panel(value)
    if panel is None:
        return value
    stripped = _urls_mapped(panel, url_without_userinfo)
    return json.dumps(stripped) if isinstance(value, str) else stripped


# The panels the judged tasks' loaders checked in this process, by key: a document names its panel by this
# key (``PANEL_FIELD``), never carries it (a filter gets nothing from lm-eval but the documents).
_PANELS: dict[str, PanelConfig] = {}


def panel_key(panel: PanelConfig) -> str:
    """A short name for ``panel``: a digest of its settings as recorded (URLs without credentials)."""
    recorded = json.loads(panel.to_json())
    for judge in recorded["judges"]:
        if judge.get("base_url"):
            judge["base_url"] = url_without_userinfo(judge["base_url"])
    digest = hashlib.sha256(json.dumps(recorded, sort_keys=True).encode("utf-8")).hexdigest()
    return f"panel-{digest[:16]}"


def register_panel(panel: PanelConfig) -> str:
    """Keep ``panel`` for this process's judge filters; returns the key a document names it by. Two panels
    that differ only in a URL's credentials share a key: the one registered last is used."""
    key = panel_key(panel)
    _PANELS[key] = panel
    return key


def registered_panel(key: Any, where: str = "judge filter") -> PanelConfig:
    """The panel a document names by ``key`` (``register_panel``); a clear error for a key this process's
    loaders did not register (documents read back from a sample log, or from another process)."""
    panel = _PANELS.get(key) if isinstance(key, str) else None
    if panel is None:
        shown = repr(key) if isinstance(key, str) and len(key) <= 40 else f"a {type(key).__name__}"
        raise MedevalDataError(
            f"{where}: the documents name judge panel {shown} (field {PANEL_FIELD!r}), which no task loader of "
            "this process registered. The key is set when the task is built in the same process (from --metadata "
            f"{METADATA_KEY} or ${ENV_VAR}); documents read back from a sample log carry no panel. To judge "
            "logged answers again, use `medeval judge OUTPUT_DIR --judges FILE`."
        )
    return panel


def _secret_problems(value: Any, where: str) -> list[str]:
    problems = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).lower().replace("-", "_") in _SECRET_KEYS:
                problems.append(f"{where}: '{key}' {SECRET_MESSAGE}")
            else:
                problems += _secret_problems(inner, f"{where}.{key}")
    return problems


# what a key pasted where a variable NAME belongs looks like: a vendor's key prefix, a name longer than
# any variable's, or mixed case with digits (variable names are UPPER_CASE or lower_case); prefixes are
# matched as vendors write them (lower case), so HF_TOKEN stays a name
_KEY_PREFIXES = (
    "sk-",
    "sk_",
    "hf_",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "glpat-",
    "xox",
    "AKIA",
    "AIza",
    "pk_",
    "rk_",
    "gsk_",
    "pplx-",
    "nvapi-",
    "r8_",
)


def looks_like_a_key(value: str) -> bool:
    """True for a value that is more likely a key than an environment variable's name."""
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)
    return value.startswith(_KEY_PREFIXES) or len(value) > 40 or (mixed and len(value) >= 16)


def _env_name_problem(value: Any, where: str) -> str | None:
    if not isinstance(value, str) or not _ENV_NAME.match(value) or looks_like_a_key(value):
        # never echo the value: it is often the key itself, pasted in the wrong place
        return (
            f"{where} must be the NAME of an environment variable (letters, digits, '_'), e.g. \"MY_JUDGE_KEY\"; "
            "the value given is not one (not shown, in case it is a key)."
        )
    return None


def _judge_from(raw: Any, index: int, where: str, problems: list[str] | None = None) -> JudgeConfig | None:
    """The judge ``raw`` describes; each problem with it is appended to ``problems`` (None then), or raised
    (the first) when no list is given."""
    found: list[str] = []
    judge = _judge_problems(raw, index, where, found)
    if problems is None:
        if found:
            raise MedevalDataError(found[0])
        return judge
    problems += found
    return None if found else judge


def _judge_problems(raw: Any, index: int, where: str, problems: list[str]) -> JudgeConfig | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: judge {index} is a {type(raw).__name__}, expected an object.")
        return None
    raw = dict(raw)
    model_args = raw.get("model_args") or {}
    if not isinstance(model_args, dict):
        problems.append(f"{where}: judge {index} model_args must be an object.")
        return None
    model_args = dict(model_args)
    header_env = {**(model_args.pop("header_env", None) or {}), **(raw.pop("header_env", None) or {})}
    raw["model_args"] = model_args
    secrets = _secret_problems(raw, f"{where}: judge {index}")
    problems += secrets
    allowed = {"name", "backend", "model", "base_url", "api_key_env", "temperature", "max_tokens", "model_args"}
    unknown = sorted(set(raw) - allowed - {k for k in raw if str(k).lower().replace("-", "_") in _SECRET_KEYS})
    if unknown:
        problems.append(
            f"{where}: judge {index} has unknown field(s) {unknown}; allowed: {sorted(allowed | {'header_env'})}."
        )
    for needed in ("backend", "model"):
        if not raw.get(needed):
            problems.append(f'{where}: judge {index} needs "{needed}" (e.g. "local-chat-completions").')
    name = str(raw.get("name") or f"judge{index + 1}")
    if not _NAME.match(name):
        problems.append(f"{where}: judge name {name!r} must be 1-40 letters, digits, '_', '.', '-'.")
    temperature, max_tokens = raw.get("temperature", 0.0), raw.get("max_tokens", 512)
    if not _is_number(temperature) or temperature < 0:
        problems.append(f"{where}: judge {name} temperature must be a number >= 0 (got {_shown(temperature)}).")
        temperature = 0.0
    if not _is_int(max_tokens) or max_tokens < 1:
        problems.append(f"{where}: judge {name} max_tokens must be a whole number >= 1 (got {_shown(max_tokens)}).")
        max_tokens = 512
    for text_field in ("base_url",):
        if raw.get(text_field) is not None and not isinstance(raw[text_field], str):
            problems.append(f"{where}: judge {name} {text_field} must be a string (got {_shown(raw[text_field])}).")
    api_key_env = raw.get("api_key_env")
    if api_key_env is not None:
        problem = _env_name_problem(api_key_env, f"{where}: judge {name} api_key_env")
        if problem:
            problems.append(problem)
    for header, variable in header_env.items():
        if not isinstance(header, str) or not _HEADER_NAME.match(header):
            problems.append(f"{where}: judge {name} header_env: {header!r} is not an HTTP header name.")
        else:
            problem = _env_name_problem(variable, f"{where}: judge {name} header_env[{header!r}]")
            if problem:
                problems.append(problem)
    if problems:  # this judge is left out of validate_panel: say here what it would have said of its backend
        backend = raw.get("backend")
        problem = _backend_problem(backend) if isinstance(backend, str) and backend else None
        if problem:
            problems.append(f"{where}: judge {name}: {problem}")
        return None
    return JudgeConfig(
        name=name,
        backend=str(raw["backend"]),
        model=str(raw["model"]),
        base_url=raw.get("base_url"),
        api_key_env=api_key_env,
        temperature=float(temperature),
        max_tokens=max_tokens,
        model_args=model_args,
        header_env=dict(header_env),
    )


_SETTINGS = {
    "concurrency",
    "max_retries",
    "max_reasks",
    "timeout",
    "backoff_base",
    "backoff_max",
    "cache",
    "rubric",
    "require_answer_id",
    "fail_fast",
}


def _is_number(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A setting's value for an error line: its type and a short repr (settings hold no keys)."""
    text = repr(value)
    return f"{text[:40]}..." if len(text) > 40 else text


# (check, what it must be) per panel setting; each wrong one is one line of the panel check's error
_SETTING_RULES: dict[str, tuple[Any, str]] = {
    "concurrency": (lambda v: _is_int(v) and v >= 1, "a whole number >= 1"),
    "max_retries": (lambda v: _is_int(v) and v >= 0, "a whole number >= 0"),
    "max_reasks": (lambda v: _is_int(v) and v >= 0, "a whole number >= 0"),
    "fail_fast": (lambda v: _is_int(v) and v >= 0, "a whole number >= 0 (0: never stop a judge)"),
    "timeout": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0, e.g. 120"),
    "backoff_base": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0, e.g. 1"),
    "backoff_max": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0, e.g. 30"),
    "cache": (lambda v: v is None or (isinstance(v, str) and v.strip() != ""), "a file path, or null for no cache"),
    "rubric": (lambda v: v is None or (isinstance(v, str) and v.strip() != ""), "a rubric YAML file path, or null"),
    "require_answer_id": (lambda v: isinstance(v, bool), "true or false"),
}


def _setting_problems(settings: dict[str, Any]) -> list[str]:
    problems = [
        f"panel setting {key!r} must be {what} (got {_shown(settings[key])})."
        for key, (ok, what) in _SETTING_RULES.items()
        if key in settings and not ok(settings[key])
    ]
    backoff_base, backoff_max = settings.get("backoff_base", 1.0), settings.get("backoff_max", 30.0)
    if not problems and backoff_base > backoff_max:
        problems.append(f"panel setting 'backoff_base' ({backoff_base}) must not exceed 'backoff_max' ({backoff_max}).")
    return problems


def panel_from_obj(obj: Any, where: str) -> PanelConfig:
    """The panel ``obj`` describes. Every problem in it is reported at once, in one error: each judge's, the
    panel settings', and (when the rest is sound enough to tell) what ``validate_panel`` would find."""
    if isinstance(obj, list):
        obj = {"judges": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("judges"), list) or not obj["judges"]:
        raise MedevalDataError(f'{where}: expected {{"judges": [...]}} or a list of judges, with at least one judge.')
    problems: list[str] = []
    judges = tuple(j for j in (_judge_from(raw, i, where, problems) for i, raw in enumerate(obj["judges"])) if j)
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        problems.append(f"{where}: judge names must be distinct (got {names}).")
    settings = {k: v for k, v in obj.items() if k != "judges"}
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        close = [c for k in unknown for c in difflib.get_close_matches(k, sorted(_SETTINGS), n=1)]
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        problems.append(f"{where}: unknown panel setting(s) {unknown}{hint}; allowed: {sorted(_SETTINGS)}.")
    panel = None
    wrong = _setting_problems(settings)
    problems += wrong
    if not wrong:  # each setting of the right type and range: nothing fails later, on the first retry
        panel = PanelConfig(judges=judges, **{k: v for k, v in settings.items() if k in _SETTINGS})
    if problems:
        if panel is not None:  # the rest of what a run would refuse, so that one fix-up is enough
            try:
                validate_panel(panel, where=where)
            except MedevalDataError as exc:
                problems += [line.strip() for line in str(exc).removeprefix(f"{where}: ").splitlines() if line.strip()]
        raise MedevalDataError(
            f"{where}: "
            + (
                "\n  ".join([""] + [p.removeprefix(f"{where}: ") for p in problems])
                if len(problems) > 1
                else problems[0].removeprefix(f"{where}: ")
            )
        )
    return panel


def load_panel(value: str | None = None, where: str = "judges config") -> PanelConfig | None:
    """The panel from ``value`` (inline JSON or a file path), else ``$MEDEVAL_JUDGES``; None if neither is set."""
    if value is None:
        value = env_setting(JUDGES)
        where = ENV_VAR
    if value is None or not str(value).strip():
        return None
    text = str(checked_value(str(value), where, ENV_VAR)).strip()
    if not text.startswith(("{", "[")):
        where, text = _judges_file_text(text, where)
        if Path(where).suffix.lower() in {".yaml", ".yml"}:
            import yaml

            try:
                return panel_from_obj(yaml.safe_load(text), where)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
                problem = " ".join(str(getattr(exc, "problem", None) or "").split()) or type(exc).__name__
                raise MedevalDataError(
                    f"{where}: not valid YAML{at}: {problem}. Fix the file, or give the panel as JSON."
                ) from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MedevalDataError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).") from exc
    return panel_from_obj(obj, where)


def _judges_file_text(text: str, where: str) -> tuple[str, str]:
    """(the file's name, its text) for a judges value that is not inline JSON; every way it cannot be read is one
    line quoting at most an excerpt of the value (a variable filled with the wrong text can be 100 KB long)."""
    if len(text) > MAX_VALUE_CHARS or "\n" in text or "\r" in text:
        raise MedevalDataError(
            f"{where}: {excerpt(text)} is neither inline JSON (it does not start with {{ or [) nor the path of a "
            "judges file. Give the panel as JSON or the judges file's path."
        )
    path = Path(text).expanduser()
    try:
        if not path.is_file():
            raise MedevalDataError(
                f"{where}: {excerpt(str(path), 200)} is neither inline JSON nor an existing judges file."
            )
        return str(path), path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MedevalDataError(
            f"{where}: the judges file {excerpt(str(path), 200)} cannot be read ({exc.strerror or type(exc).__name__}). "
            "Check the path and its permissions."
        ) from None
    except UnicodeDecodeError as exc:
        raise MedevalDataError(
            f"{where}: the judges file {path} is not UTF-8 text (byte {exc.start}). Save it as UTF-8."
        ) from None


def panel_from_metadata(metadata: dict[str, Any]) -> PanelConfig | None:
    """The panel a task's ``--metadata`` names (``medeval_judges``), else ``$MEDEVAL_JUDGES``."""
    value = metadata.get(METADATA_KEY)
    if value is not None and not isinstance(value, str):
        value = json.dumps(value)  # --metadata gave the config inline, already parsed
    return load_panel(value, where=f"--metadata {METADATA_KEY}") if value else load_panel()


def panel_from_flags(
    models: Sequence[str],
    base_urls: Sequence[str] = (),
    key_envs: Sequence[str] = (),
    backend: str | None = None,
    base: PanelConfig | None = None,
) -> PanelConfig:
    """A panel from MedARC-style list flags: ``--judge-model A --judge-model B``, with
    ``--judge-base-url`` and ``--judge-api-key-env`` matched by position; one value is broadcast to all.
    Without a base URL the backend is ``openai-chat-completions``, with one ``local-chat-completions``.
    ``base`` (a judges file) supplies the panel settings."""
    models = list(models)
    if not models:
        raise MedevalDataError("--judge-model: give at least one judge model.")

    def spread(values: Sequence[str], flag: str) -> list[str | None]:
        values = list(values)
        if not values:
            return [None] * len(models)
        if len(values) == 1:
            return values * len(models)
        if len(values) != len(models):
            raise MedevalDataError(
                f"{flag} was given {len(values)} times for {len(models)} --judge-model values: give it once "
                "(for all judges) or once per judge, in the same order."
            )
        return values

    judges = []
    for index, (model, url, key_env) in enumerate(
        zip(models, spread(base_urls, "--judge-base-url"), spread(key_envs, "--judge-api-key-env"))
    ):
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", model)[-40:] or f"judge{index + 1}"
        entry: dict[str, Any] = {
            "name": name,
            "model": model,
            "backend": backend or ("local-chat-completions" if url else "openai-chat-completions"),
        }
        if url:
            entry["base_url"] = (
                url if url.rstrip("/").endswith("completions") else url.rstrip("/") + "/chat/completions"
            )
        if key_env:
            entry["api_key_env"] = key_env
        judges.append(entry)
    names = [j["name"] for j in judges]
    for index, name in enumerate(names):  # the same model twice (at two URLs): number them
        if names.count(name) > 1:
            judges[index]["name"] = f"{name[:36]}_{index + 1}"
    settings = json.loads(base.to_json()) if base is not None else {}
    settings.pop("judges", None)
    return panel_from_obj({"judges": judges, **settings}, "--judge-model flags")


def _backend_problem(backend: str) -> str | None:
    import lm_eval.models  # noqa: F401  (fills the model registry)
    from lm_eval.api.registry import MODEL_REGISTRY, get_model

    known = sorted(MODEL_REGISTRY.keys())
    if backend not in known:
        close = difflib.get_close_matches(backend, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else f" Known: {', '.join(known)}."
        return f"unknown lm-eval backend {backend!r}.{hint}"
    try:
        get_model(backend)
    except ImportError as exc:  # a known backend whose package is not installed (vllm, ...)
        return f"lm-eval backend {backend!r} needs a package that is not installed ({exc.name or exc}); pip install it."
    return None


def _cache_problem(path_text: str) -> str | None:
    path = Path(path_text).expanduser()
    try:
        return _cache_file_problem(path)
    except OSError as exc:  # a folder of another user's on the way (EACCES), a name too long...
        return (
            f"cache {path} cannot be used ({exc.strerror or type(exc).__name__}): it or a folder above it belongs to "
            'another user or is not readable; choose a "cache" path of your own (e.g. under your home folder), or '
            "remove the old cache."
        )


def _cache_file_problem(path: Path) -> str | None:
    from medeval_metrics.safe_files import private_folder

    if path.is_dir():
        return f"cache {path} is a folder; give a file path such as {path / 'judge_cache.sqlite'}."
    try:
        private_folder(path.parent)  # verdicts quote the answers: the folders made for them are the user's only
    except OSError as exc:
        return f'cache folder {path.parent} cannot be created ({type(exc).__name__}); choose another "cache" path.'
    if not os.access(path.parent, os.W_OK):
        return f'cache folder {path.parent} is not writable{_owner_note(path.parent)}; choose another "cache" path.'
    if path.exists():
        with path.open("rb") as handle:
            head = handle.read(16)
        if head and head != b"SQLite format 3\x00":
            return f'cache {path} exists and is not a SQLite file; remove it or choose another "cache" path.'
        if not os.access(path, os.W_OK):
            return f'cache {path} is not writable{_owner_note(path)}; choose another "cache" path.'
        try:
            with sqlite3.connect(path) as conn:
                conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            return f"cache {path} is not a usable SQLite database ({type(exc).__name__}); remove it or choose another."
    return None


def _owner_note(path: Path) -> str:
    """The note ", it belongs to another user" where it does (the usual reason a cache cannot be written)."""
    try:
        return ", it belongs to another user" if path.stat().st_uid != os.geteuid() else ""
    except (OSError, AttributeError):  # no geteuid on Windows
        return ""


def validate_panel(
    panel: PanelConfig, where: str = "judge panel", environ: Any = None, check_backends: bool = True
) -> None:
    """Check the whole panel before any generation; raise one MedevalDataError listing every problem.

    Checks: backend names (with a suggestion), ``base_url`` where the backend needs one, each key
    variable set, the cache path usable (creatable, writable, a SQLite file or absent), the rubric file.
    ``medeval run`` calls this in its pre-flight checks; a judged task's loader calls it too.
    """
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    for judge in panel.judges:
        if check_backends:
            backend = _backend_problem(judge.backend)
            if backend:
                problems.append(f"judge {judge.name}: {backend}")
        device = device_problem(judge)
        if device:
            problems.append(device)
        if judge.backend in NEEDS_BASE_URL and not judge.base_url:
            problems.append(
                f'judge {judge.name}: backend {judge.backend} needs "base_url" (e.g. '
                '"http://127.0.0.1:8000/v1/chat/completions").'
            )
        for variable in [judge.api_key_env, *judge.header_env.values()]:
            if variable and not environ.get(variable):
                problems.append(
                    f"judge {judge.name}: the environment variable {variable} is not set. Export it "
                    "before the run; keys never go into the judges config or --metadata."
                )
    if panel.cache:
        cache = _cache_problem(panel.cache)
        if cache:
            problems.append(cache)
    if panel.rubric:
        from medeval_metrics.judge.rubric import load_rubric

        try:
            load_rubric(panel.rubric)
        except MedevalDataError as exc:
            problems.append(str(exc))
    if problems:
        raise MedevalDataError(f"{where}: " + ("\n  ".join([""] + problems) if len(problems) > 1 else problems[0]))


def panel_for_task(metadata: dict[str, Any], where: str = "judge panel") -> PanelConfig | None:
    """For a judged task's loader: the panel from ``--metadata``/``$MEDEVAL_JUDGES``, checked completely
    now (before any generation), or None. The loader puts ``register_panel(panel)``, the panel's key, in
    each document's ``PANEL_FIELD`` for the judge filter."""
    panel = panel_from_metadata(metadata)
    if panel is not None:
        validate_panel(panel, where=where)
    return panel
