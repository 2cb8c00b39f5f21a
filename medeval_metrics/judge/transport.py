"""The API judges' asyncio transport: one aiohttp session, a keep-alive connection pool, and exactly
each judge's own headers.

Why asyncio: a thread per request in flight costs the client 1-5 ms of CPU per request (interpreter
contention between threads), which caps a panel at a few hundred requests per second however fast
the judges are; one event loop costs a fraction of that. The request is the one lm-eval's backend
would send (``lm_eval_compat.api_request_payload``: its own payload; its ``header``, which
``set_api_request_headers`` made exactly the configured ones; its ``verify_certificate`` and
``timeout``), and the reply is read by the backend's own ``parse_generations``.

What the session does not do, on purpose: keep cookies (two judges on one host would share them),
follow redirects (a redirect would carry a judge's key to another URL; it fails as "HTTP 3xx"),
read a reply past ``http_safety.JUDGE_REPLY_LIMIT`` (4 MB, compressed or unpacked: "reply larger than 4 MB"),
or read ``~/.netrc`` (it would add an Authorization header the config never named). Proxies
(``HTTPS_PROXY``, ``NO_PROXY``) and certificate bundles (``REQUESTS_CA_BUNDLE``, else certifi's)
come from the environment, as with ``requests``.
Failures are described by status code or error class only (``TransportFailure``): never an error
message or a body, which can quote a URL, a header or the request.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from medeval_metrics.http_safety import JUDGE_REPLY_LIMIT, read_capped_async
from medeval_metrics.judge.client import RETRYABLE_STATUS, JudgeClient, TransportFailure, _retry_after_seconds

# What the judges' API replies say they used, per judge, for this process (requests answered, tokens from the
# "usage" fields): ``medeval run`` records each task's share in its results (lm_eval_compat.run_record).
USAGE: dict[str, Counter] = defaultdict(Counter)


def count_usage(judge: str, outputs: Any) -> None:
    usage = outputs.get("usage") if isinstance(outputs, dict) else None
    USAGE[judge]["requests"] += 1
    for field in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage, dict) and isinstance(usage.get(field), int):
            USAGE[judge][field] += usage[field]


def _proxy_for(url: str) -> str | None:
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _ssl_for(url: str, verify: bool) -> Any:
    """Certificate checking as ``requests`` does it: off when the backend says so, else against
    ``$REQUESTS_CA_BUNDLE`` / ``$CURL_CA_BUNDLE`` or certifi's bundle (not only the system's)."""
    import os

    if not verify:
        return False
    if not url.lower().startswith("https:"):
        return True  # plain HTTP: nothing to verify
    import ssl

    variable = next((v for v in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE") if os.environ.get(v)), None)
    if variable is None:
        import certifi

        bundle = certifi.where()
    else:
        bundle = os.environ[variable]
        if not os.path.exists(bundle):
            from medeval_metrics.data import MedevalDataError

            raise MedevalDataError(
                f"{variable} names {bundle}, which does not exist: point it at a CA bundle "
                f"file or folder, or unset it to use certifi's."
            )
    return (
        ssl.create_default_context(cafile=bundle)
        if os.path.isfile(bundle)
        else ssl.create_default_context(capath=bundle)
    )


def classify_async(exc: BaseException) -> TransportFailure:
    """A failure as a reason: a status or an error class, never the message (it can quote the request)."""
    import aiohttp

    if isinstance(exc, TransportFailure):
        return exc
    from medeval_metrics.http_safety import ReplyTooLarge

    if isinstance(exc, ReplyTooLarge):  # the same reply again would be as large: not retried
        return TransportFailure(f"reply larger than {exc.limit // 2**20} MB", retryable=False)
    from medeval_metrics.data import MedevalDataError

    if isinstance(exc, MedevalDataError):  # a content encoding the pack did not ask for
        return TransportFailure("reply in an unsupported content encoding", retryable=False)
    if isinstance(exc, asyncio.TimeoutError):  # aiohttp's ServerTimeoutError is one too
        return TransportFailure("timeout", retryable=True)
    if isinstance(exc, aiohttp.ClientError):
        return TransportFailure("connection error", retryable=True)
    if isinstance(exc, ValueError):  # reply body was not JSON
        return TransportFailure("reply body is not valid JSON", retryable=True)
    return TransportFailure(f"request failed ({type(exc).__name__})", retryable=True)


@dataclass(frozen=True)
class _Route:
    """Where and how one judge's requests go, fixed before the first request."""

    url: str
    headers: dict[str, str]
    ssl: Any  # an SSLContext, True (plain HTTP) or False (certificates not verified)
    proxy: str | None
    timeout: Any


class AsyncJudgeTransport:
    """Use as ``async with AsyncJudgeTransport(clients, pool_size) as transport``, inside a running loop."""

    def __init__(self, clients: dict[str, JudgeClient], pool_size: int) -> None:
        self.clients, self.pool_size = clients, pool_size
        self._routes: dict[str, _Route] = {}
        self._session: Any = None

    def _route(self, name: str) -> _Route:
        route = self._routes.get(name)
        if route is None:
            import aiohttp

            lm = self.clients[name].lm
            # exactly the backend's headers (set_api_request_headers made them the configured ones)
            from medeval_metrics.http_safety import with_accept_encoding

            headers = with_accept_encoding(lm.header)  # only encodings the capped reader unpacks
            if not any(name.lower() == "content-type" for name in headers):
                headers["Content-Type"] = "application/json"  # as requests' json= adds it
            route = self._routes[name] = _Route(
                url=lm.base_url,
                headers=headers,
                ssl=_ssl_for(lm.base_url, bool(lm.verify_certificate)),
                proxy=_proxy_for(lm.base_url),
                timeout=aiohttp.ClientTimeout(total=lm.timeout),
            )
        return route

    async def __aenter__(self) -> AsyncJudgeTransport:
        import aiohttp

        for name, client in self.clients.items():
            if client.is_api:
                self._route(name)
        # the pool holds at most one connection per request in flight, kept alive between requests
        connector = aiohttp.TCPConnector(limit=self.pool_size, limit_per_host=0, keepalive_timeout=30)
        # auto_decompress off: replies are unpacked by the capped reader (http_safety), never past the cap
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            raise_for_status=False,
            auto_decompress=False,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()

    async def request(self, judge: str, messages: list[dict[str, str]]) -> str | None:
        """One request of judge ``judge``: its reply text (None: the backend read no text); raises
        ``TransportFailure``."""
        client, route = self.clients[judge], self._routes[judge]
        try:
            context, payload = client.api_payload(messages)
            body = json.dumps(payload, allow_nan=False).encode("utf-8")  # what requests' json= sends
            async with self._session.post(
                route.url,
                data=body,
                headers=route.headers,
                ssl=route.ssl,
                proxy=route.proxy,
                timeout=route.timeout,
                allow_redirects=False,
            ) as response:
                status = response.status
                # read in full (the connection goes back to the pool), at most JUDGE_REPLY_LIMIT bytes
                data = await read_capped_async(response, JUDGE_REPLY_LIMIT, "judge's reply")
                retry_after = response.headers.get("Retry-After")
            if status >= 300:
                raise TransportFailure(
                    f"HTTP {status}",
                    retryable=status in RETRYABLE_STATUS,
                    retry_after=_retry_after_seconds(retry_after),
                )
            outputs = json.loads(data)
            count_usage(judge, outputs)
            replies = client.lm.parse_generations(outputs=outputs, contexts=[context])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise classify_async(exc) from None
        return replies[0] if replies else None
