"""The judges' health check: one tiny fixed request per API judge, before anything is generated.

A panel whose server is down, whose key is refused or whose model name is wrong would otherwise be
found only after the model has answered every item. ``panel_problems`` sends each API judge one
short request (all judges at once, ``CHECK_TIMEOUT`` seconds at most) and returns one line per judge
that failed in transport; any reply at all, readable as a verdict or not, is a pass (a judge that is
up but writes badly is the re-ask's business). Batch judges (``hf``, ``vllm``) are not checked: that
would load their model. ``medeval run`` calls ``run_problems`` after its other checks and before
lm-eval builds the model; ``medeval judge`` calls ``panel_problems`` before judging;
``--skip-judge-check`` turns both off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from medeval_metrics.command_line import parse_metadata
from medeval_metrics.data import MedevalDataError
from medeval_metrics.judge.config import JudgeConfig, PanelConfig

SKIP_FLAG = "--skip-judge-check"
CHECK_TIMEOUT = 8.0  # seconds per judge, all judges in parallel: a dead panel fails in under 10 s
CHECK_MESSAGES = [{"role": "user", "content": "This is a connection check from medeval. Reply with the word OK."}]
_CHECK_MAX_TOKENS = 16


def _where(judge: JudgeConfig, lm: Any) -> str:
    url = getattr(lm, "base_url", None) or judge.base_url or ""
    parts = urlsplit(str(url))
    # host and port only: credentials before the host, a path or a query may carry more than a user wants shown
    host = parts.netloc.rsplit("@", 1)[-1]
    return host or "the judge's base_url"


def _explain(judge: JudgeConfig, reason: str, where: str) -> str:
    """A transport failure as the user's next step."""
    status = reason.split(" after ", 1)[0]
    if status == "HTTP 401":
        key = f"the key in ${judge.api_key_env}" if judge.api_key_env else "no key (the judge has no api_key_env)"
        return f"HTTP 401 from {where}: {key} was refused"
    if status == "HTTP 403":
        return f"HTTP 403 from {where}: the key may not use model {judge.model!r}"
    if status == "HTTP 404":
        return f"HTTP 404 from {where}: no such endpoint or model (check base_url and the model name {judge.model!r})"
    if status in ("HTTP 400", "HTTP 422"):
        return (
            f"{status} from {where}: the request was refused (an unknown model name, {judge.model!r}, is often "
            "reported this way)"
        )
    if status == "connection error":
        return f"cannot connect to {where}: is the judge's server running, and is base_url right?"
    if status == "timeout":
        return f"no reply from {where} within {CHECK_TIMEOUT:.0f} s"
    return f"{status} from {where}"


async def _ask_all(clients: dict[str, Any]) -> dict[str, str | None]:
    """Per judge: None when it answered, else the transport failure's reason."""
    from medeval_metrics.judge.client import TransportFailure
    from medeval_metrics.judge.transport import AsyncJudgeTransport

    async with AsyncJudgeTransport(clients, max(1, len(clients))) as transport:

        async def one(name: str) -> str | None:
            for attempt in range(2):  # one retry for a 5xx or a dropped connection; 4xx are final
                try:
                    await transport.request(name, CHECK_MESSAGES)
                    return None
                except TransportFailure as failure:
                    if failure.reason == "HTTP 429":
                        return None  # rate-limited: the judge is up, and the key and model were accepted
                    if not failure.retryable or failure.reason == "timeout" or attempt == 1:
                        return failure.reason
                    await asyncio.sleep(0.5)
            return None

        names = list(clients)
        return dict(zip(names, await asyncio.gather(*(one(name) for name in names))))


def panel_problems(panel: PanelConfig) -> list[str]:
    """One line per API judge of ``panel`` that cannot be used (unreachable, key refused, no such
    model...); empty when every one answered."""
    from medeval_metrics.judge.client import JudgeClient
    from medeval_metrics.judge.runner import run_coroutine

    checking = replace(panel, timeout=min(panel.timeout, CHECK_TIMEOUT))
    clients: dict[str, Any] = {}
    problems: list[str] = []
    for judge in panel.judges:
        if not _is_api_backend(judge.backend):
            continue
        try:
            clients[judge.name] = JudgeClient(replace(judge, max_tokens=_CHECK_MAX_TOKENS), checking)
        except MedevalDataError as exc:
            problems.append(str(exc))
        except Exception as exc:
            problems.append(
                f"judge {judge.name}: its lm-eval backend {judge.backend!r} could not be built ({type(exc).__name__})"
            )
    if clients:
        outcomes = run_coroutine(_ask_all(clients))
        for name, reason in outcomes.items():
            if reason is not None:
                client = clients[name]
                problems.append(f"judge {name}: {_explain(client.config, reason, _where(client.config, client.lm))}")
    return [f"{line}; {SKIP_FLAG} skips this check" for line in problems]


def _is_api_backend(backend: str) -> bool:
    import lm_eval.models  # noqa: F401  (fills the model registry)
    from lm_eval.api.registry import get_model
    from lm_eval.models.api_models import TemplateAPI

    try:
        cls = get_model(backend)
    except (KeyError, ValueError):
        return False  # an unknown backend is validate_panel's problem, reported already
    return isinstance(cls, type) and issubclass(cls, TemplateAPI)


def run_problems(argv: Sequence[str], tasks: Sequence[str], metadata: Mapping[str, Any] | None = None) -> list[str]:
    """For ``medeval run``: the health check of the panel the run will use (``--metadata medeval_judges``
    or ``$MEDEVAL_JUDGES``) when one of ``tasks`` is judged; empty when none is, or no panel is set.
    ``metadata``: the run's metadata as lm-eval reads it (repeated flags merged); else read from ``argv``."""
    from medeval_metrics import registry

    if not any(registry.judging_for(task) is not None for task in tasks):
        return []
    from medeval_metrics.judge.config import panel_for_task

    panel = panel_for_task((parse_metadata(argv) if metadata is None else metadata) or {})
    return panel_problems(panel) if panel is not None else []
