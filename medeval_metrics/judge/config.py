"""Judge panel configuration: which judges, how hard to try, where to cache.

The panel is inline JSON or the path of a JSON/YAML judges file, given as

1. ``--metadata '{"medeval_judges": "/path/judges.yaml"}'`` on the lm-eval/medeval command line: the
   task's data loader (which, unlike a filter, receives ``--metadata``) validates it before any
   generation and hands it to the judge filter of the same process;
2. the environment variable ``MEDEVAL_JUDGES`` (reaches the filter, ``medeval judge`` and
   data-parallel ranks alike);
3. ``medeval judge --judges FILE`` for judging afterwards.

The command line wins over the environment. lm-eval copies ``--metadata`` into the results JSON,
which is why a judges config may name key variables but never hold a key. Shape::

    {"judges": [
        {"name": "gpt4o", "backend": "openai-chat-completions", "model": "gpt-4o",
         "api_key_env": "OPENAI_API_KEY", "temperature": 0, "max_tokens": 512},
        {"name": "local", "backend": "local-chat-completions", "model": "llama",
         "base_url": "http://127.0.0.1:8000/v1/chat/completions", "model_args": {"tokenizer_backend": "none"}}],
     "concurrency": 32, "max_retries": 4, "max_reasks": 1, "timeout": 120,
     "cache": "~/.cache/medeval/judge.sqlite"}

A plain list is a panel with default settings. API keys are named, never given: ``api_key_env``
is the variable that holds the key; a key-looking value anywhere in the config is refused.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError

ENV_VAR = "MEDEVAL_JUDGES"
METADATA_KEY = "medeval_judges"
DEFAULT_CACHE = "~/.cache/medeval/judge_cache.sqlite"
_SECRET_KEYS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


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


@dataclass(frozen=True)
class PanelConfig:
    judges: tuple[JudgeConfig, ...]
    concurrency: int = 32
    max_retries: int = 4  # transport errors and rate limits, per request
    max_reasks: int = 1  # follow-up turns after an unusable verdict
    timeout: float = 120.0  # seconds per request
    backoff_base: float = 1.0  # seconds; doubled per retry, capped at backoff_max
    backoff_max: float = 30.0
    cache: str | None = DEFAULT_CACHE  # None: no cache

    @property
    def judge_names(self) -> list[str]:
        return [j.name for j in self.judges]


def _refuse_secrets(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).lower().replace("-", "_") in _SECRET_KEYS:
                raise MedevalDataError(
                    f"{where}: '{key}' would put a secret in the judges config. Put the key in an environment "
                    "variable and name it with \"api_key_env\": \"MY_JUDGE_KEY\"."
                )
            _refuse_secrets(inner, f"{where}.{key}")


def _judge_from(raw: Any, index: int, where: str) -> JudgeConfig:
    if not isinstance(raw, dict):
        raise MedevalDataError(f"{where}: judge {index} is a {type(raw).__name__}, expected an object.")
    _refuse_secrets(raw, f"{where}: judge {index}")
    allowed = {"name", "backend", "model", "base_url", "api_key_env", "temperature", "max_tokens", "model_args"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise MedevalDataError(
            f"{where}: judge {index} has unknown field(s) {unknown}; allowed: {sorted(allowed)}."
        )
    for needed in ("backend", "model"):
        if not raw.get(needed):
            raise MedevalDataError(f"{where}: judge {index} needs \"{needed}\" (e.g. \"local-chat-completions\").")
    name = str(raw.get("name") or f"judge{index + 1}")
    if not _NAME.match(name):
        raise MedevalDataError(f"{where}: judge name {name!r} must be 1-40 letters, digits, '_', '.', '-'.")
    model_args = raw.get("model_args") or {}
    if not isinstance(model_args, dict):
        raise MedevalDataError(f"{where}: judge {name} model_args must be an object.")
    try:
        temperature, max_tokens = float(raw.get("temperature", 0.0)), int(raw.get("max_tokens", 512))
    except (TypeError, ValueError) as exc:
        raise MedevalDataError(f"{where}: judge {name} temperature/max_tokens must be numbers.") from exc
    return JudgeConfig(
        name=name,
        backend=str(raw["backend"]),
        model=str(raw["model"]),
        base_url=raw.get("base_url"),
        api_key_env=raw.get("api_key_env"),
        temperature=temperature,
        max_tokens=max_tokens,
        model_args=dict(model_args),
    )


def panel_from_obj(obj: Any, where: str) -> PanelConfig:
    if isinstance(obj, list):
        obj = {"judges": obj}
    if not isinstance(obj, dict) or not isinstance(obj.get("judges"), list) or not obj["judges"]:
        raise MedevalDataError(f"{where}: expected {{\"judges\": [...]}} or a list of judges, with at least one judge.")
    judges = tuple(_judge_from(raw, i, where) for i, raw in enumerate(obj["judges"]))
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise MedevalDataError(f"{where}: judge names must be distinct (got {names}).")
    settings = {k: v for k, v in obj.items() if k != "judges"}
    allowed = {"concurrency", "max_retries", "max_reasks", "timeout", "backoff_base", "backoff_max", "cache"}
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise MedevalDataError(f"{where}: unknown panel setting(s) {unknown}; allowed: {sorted(allowed)}.")
    panel = PanelConfig(judges=judges, **settings)
    if panel.concurrency < 1 or panel.max_retries < 0 or panel.max_reasks < 0:
        raise MedevalDataError(f"{where}: concurrency must be >= 1, max_retries and max_reasks >= 0.")
    return panel


# set by a task's data loader from --metadata, read by the judge filter later in the same process
_runtime_panel: PanelConfig | None = None


def check_keys_present(panel: PanelConfig) -> None:
    missing = [f"{j.name}: {j.api_key_env}" for j in panel.judges if j.api_key_env and not os.environ.get(j.api_key_env)]
    if missing:
        raise MedevalDataError(
            f"judge API key variable(s) not set ({', '.join(missing)}). Export them before the run; keys never go "
            "into the judges config or --metadata."
        )


def configure_from_metadata(metadata: dict[str, Any]) -> PanelConfig | None:
    """Called by a task's data loader (before generation): validate the panel now, not after hours of
    generation, and remember a --metadata panel for the judge filter. Returns the panel in effect."""
    global _runtime_panel
    value = metadata.get(METADATA_KEY)
    if value is not None and not isinstance(value, str):
        value = json.dumps(value)  # --metadata gave the config inline, already parsed
    _runtime_panel = load_panel(value, where=f"--metadata {METADATA_KEY}") if value else None
    panel = _runtime_panel or load_panel()
    if panel is not None:
        check_keys_present(panel)
    return panel


def load_panel(value: str | None = None, where: str = "judges config") -> PanelConfig | None:
    """The panel from ``value`` (inline JSON or a file path), else the one given by ``--metadata`` to
    this process's task loader, else ``$MEDEVAL_JUDGES``; None if none is set."""
    if value is None and _runtime_panel is not None:
        return _runtime_panel
    if value is None:
        value = os.environ.get(ENV_VAR)
        where = ENV_VAR
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    if not text.startswith(("{", "[")):
        path = Path(text).expanduser()
        if not path.is_file():
            raise MedevalDataError(f"{where}: {path} is neither inline JSON nor an existing judges file.")
        where, text = str(path), path.read_text(encoding="utf-8")
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            try:
                return panel_from_obj(yaml.safe_load(text), where)
            except yaml.YAMLError as exc:
                raise MedevalDataError(f"{where}: not valid YAML ({exc}).") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MedevalDataError(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).") from exc
    return panel_from_obj(obj, where)
