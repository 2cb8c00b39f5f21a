"""The model, resolved before any data or task is touched: a local folder that does not exist, a ``gguf_file``
that is not there, a Hub id while the Hub cannot be reached (and the id is not in the local cache), and
``--apply_chat_template`` with a tokenizer that has no chat template are one line each, in seconds, instead of
a transformers traceback after the model (and the data) was loaded.

Only the backends that load ``pretrained`` from a folder or the Hub are checked; API models are not.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.settings import is_true
from medeval_metrics.sources import hub_endpoint, mark_hub_unreachable

# lm-eval 0.4.13's backends that take ``pretrained=`` as a folder or a Hub id
PRETRAINED_BACKENDS = frozenset({"hf", "hf-auto", "huggingface", "hf-multimodal", "vllm", "vllm-vlm", "sglang"})
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$")
PROBE_TIMEOUT_S = 3.0  # how long the Hub may take to accept a connection before it counts as unreachable


def hub_disabled(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return any(is_true(environ.get(v, "")) for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the Hub's host accepts a TCP connection within ``timeout`` (name lookup included)."""
    from urllib.parse import urlparse

    endpoint = urlparse(hub_endpoint())
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)  # a name lookup can outlast the socket's timeout
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _invalid_hub_id(value: str) -> str | None:
    """Why huggingface_hub refuses ``value`` as a repo id (it raises before any lookup), or None."""
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        return None
    try:
        validate_repo_id(value)
    except HFValidationError:
        pass
    else:
        return None
    if "--" in value or ".." in value:
        return "it holds '--' or '..'"
    if len(value) > 96:
        return f"{len(value)} characters, more than 96"
    if value.count("/") > 1:
        return "more than one '/'"
    return "a part starts or ends with '-' or '.', or holds a character other than letters, digits, '-', '_', '.'"


def _in_hub_cache(repo_id: str, filename: str, revision: str | None) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(repo_id, filename, revision=revision)
    return isinstance(found, str)


def _looks_local(value: str) -> bool:
    return (
        value.startswith(("/", "./", "../", "~", ".\\"))
        or Path(value).expanduser().exists()
        or not _HUB_ID.match(value)
    )


def model_problem(
    model: str | None, model_args: Any, environ: Mapping[str, str] | None = None, reachable=hub_reachable
) -> str | None:
    """Why the model cannot be loaded (one line naming the value and the fix), or None."""
    if (model or "hf") not in PRETRAINED_BACKENDS or not isinstance(model_args, dict):
        return None
    pretrained = model_args.get("pretrained")
    if not isinstance(pretrained, str) or not pretrained.strip():
        return None
    pretrained = pretrained.strip()
    gguf = model_args.get("gguf_file")
    gguf = gguf.strip() if isinstance(gguf, str) and gguf.strip() else None
    revision = model_args.get("revision") if isinstance(model_args.get("revision"), str) else None
    if _looks_local(pretrained):
        folder = Path(pretrained).expanduser()
        if not folder.exists():
            return (
                f"--model_args pretrained={pretrained}: no such folder. Give the folder holding the model "
                "(config.json and weights), or a Hugging Face Hub id such as Qwen/Qwen2.5-0.5B-Instruct."
            )
        if not folder.is_dir():
            return f"--model_args pretrained={pretrained} is a file: give the folder that holds it."
        if gguf:
            if not (folder / gguf).is_file() and not Path(gguf).expanduser().is_file():
                ggufs = sorted(p.name for p in folder.glob("*.gguf"))
                have = f" It holds: {', '.join(ggufs)}." if ggufs else " It holds no .gguf file."
                return f"--model_args gguf_file={gguf}: not in {folder}.{have}"
            return None
        if not (folder / "config.json").is_file():
            return (
                f"--model_args pretrained={pretrained}: {folder} has no config.json, so it is not a model folder "
                "(`medeval make-tiny-model DIR` builds a small one for a smoke run)."
            )
        return None
    # a Hub id: fine if cached, else the Hub must be reachable
    invalid = _invalid_hub_id(pretrained)
    if invalid:
        return (
            f"--model_args pretrained={pretrained}: not a folder that exists, nor a valid Hub id ({invalid}). Give "
            "the model's folder (config.json and weights), or a Hub id as org/name, e.g. Qwen/Qwen2.5-0.5B-Instruct."
        )
    wanted = gguf or "config.json"
    if _in_hub_cache(pretrained, wanted, revision):
        return None
    if hub_disabled(environ):
        return (
            f"--model_args pretrained={pretrained} is a Hub id, the Hub is off (HF_HUB_OFFLINE) and {wanted} is "
            "not in the local Hugging Face cache: download it once with the Hub on, or give a local folder."
        )
    if not reachable():
        mark_hub_unreachable()  # the data checks that follow fail at once instead of retrying
        return (
            f"--model_args pretrained={pretrained} is a Hub id, but the Hub cannot be reached ({hub_endpoint()}) "
            f"and {wanted} is not in the local cache: check the network (and HF_ENDPOINT), or give a local folder."
        )
    return None


# Where transformers keeps a tokenizer's chat template besides tokenizer_config.json's "chat_template"
# (transformers 4.43+ and 5.x save it as its own file; a processor's is chat_template.json)
_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
_TEMPLATE_FOLDER = "additional_chat_templates"


def _config_has_template(config_file: Path) -> bool | None:
    """Whether a tokenizer_config.json names a chat template (None: unreadable, so not known)."""
    import json

    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return bool(isinstance(config, dict) and config.get("chat_template"))


def _folder_has_template(folder: Path) -> bool | None:
    """Whether a local tokenizer folder holds a chat template; None when it holds no tokenizer_config.json to
    tell (e.g. a tokenizer read from a GGUF file)."""
    if any((folder / name).is_file() for name in _TEMPLATE_FILES) or any((folder / _TEMPLATE_FOLDER).glob("*.jinja")):
        return True
    config = folder / "tokenizer_config.json"
    return _config_has_template(config) if config.is_file() else None


def _cached_hub_has_template(repo_id: str, revision: str | None) -> bool | None:
    """For a Hub id, from the local Hugging Face cache only: False when tokenizer_config.json is cached without a
    template and every template file is known to be absent; None when the cache cannot tell (nothing is
    fetched: the model's own download decides)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    config = try_to_load_from_cache(repo_id, "tokenizer_config.json", revision=revision)
    if not isinstance(config, str):
        return None
    if _config_has_template(Path(config)):
        return True
    files = [try_to_load_from_cache(repo_id, name, revision=revision) for name in _TEMPLATE_FILES]
    if any(isinstance(found, str) for found in files):
        return True
    # a file transformers looked for and the Hub did not have is cached as "known absent" (not a str, not None)
    return False if all(found is not None for found in files) else None


def chat_template_problem(model: str | None, model_args: Any, apply_chat_template: bool | str) -> str | None:
    """``--apply_chat_template`` with a tokenizer that has no chat template: one line naming the folder and the
    two ways out, or None. lm-eval would load the model first and then stop in transformers ("Cannot use
    chat template functions because tokenizer.chat_template is not set", a long traceback).
    Decided only when the tokenizer's files say so: a local folder, or a Hub id whose files are cached."""
    if not apply_chat_template or (model or "hf") not in PRETRAINED_BACKENDS or not isinstance(model_args, dict):
        return None
    tokenizer = model_args.get("tokenizer") or model_args.get("pretrained")
    if not isinstance(tokenizer, str) or not tokenizer.strip() or model_args.get("gguf_file"):
        return None  # no name, or a tokenizer read out of a GGUF file (its template is inside it)
    tokenizer = tokenizer.strip()
    flag = "tokenizer" if model_args.get("tokenizer") else "pretrained"
    if _looks_local(tokenizer):
        folder = Path(tokenizer).expanduser()
        found = _folder_has_template(folder) if folder.is_dir() else None
    else:
        revision = model_args.get("revision") if isinstance(model_args.get("revision"), str) else None
        found = None if _invalid_hub_id(tokenizer) else _cached_hub_has_template(tokenizer, revision)
    if found is not False:
        return None
    return (
        f"--apply_chat_template: the tokenizer of --model_args {flag}={tokenizer} has no chat template (a base "
        "model, or one converted without it): leave out --apply_chat_template, or give a tokenizer that has one "
        "(--model_args tokenizer=ORG/NAME-Instruct)."
    )
