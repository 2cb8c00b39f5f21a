"""What every HTTP reply the pack reads must respect: a size cap, and credentials kept to their origin.

Size: a reply is read as sent (compressed), at most ``limit`` bytes, then unpacked to at most
``limit`` bytes, so neither a large body nor a small one that unpacks to gigabytes (a "zip bomb")
can grow memory past the cap; the pack asks for ``gzip, deflate`` only, the encodings it unpacks
itself. An oversized reply raises ``ReplyTooLarge``. Judges' replies are capped at
``JUDGE_REPLY_LIMIT``; the evaluated model's (where the pack owns lm-eval's client:
``lm_eval_compat.guard_model_replies``) at ``model_reply_limit()``, which a user whose batched
log-probability replies are larger can raise with ``MEDEVAL_MODEL_MAX_REPLY_MB``.

Redirects: a redirect to another origin (scheme, host, port) is followed without any header the
client was given except ``ACCEPTED_HEADERS`` (no ``Authorization``, ``x-api-key``, ``api-key`` or
any header from ``--model_args``); at most ``MAX_REDIRECTS`` hops. The judges follow none at all
(``judge.transport``).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import MODEL_MAX_REPLY_MB

JUDGE_REPLY_LIMIT = 4 * 2**20
MODEL_REPLY_DEFAULT_MB = 64
MODEL_REPLY_ENV = MODEL_MAX_REPLY_MB.name
ACCEPT_ENCODING = "gzip, deflate"
ACCEPTED_HEADERS = frozenset({"content-type", "accept", "accept-encoding", "user-agent"})
MAX_REDIRECTS = 5
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class ReplyTooLarge(MedevalDataError):
    """A reply over the size cap (compressed or unpacked); the message says which cap and how to raise it."""

    def __init__(self, limit: int, what: str = "reply", setting: str | None = None) -> None:
        hint = f" Raise it with {setting}=N (megabytes) if replies this large are expected." if setting else ""
        super().__init__(
            f"the {what} is larger than {limit / 2**20:g} MB, the most the pack reads; it was not read.{hint}"
        )
        self.limit = limit


def model_reply_limit(environ: Mapping[str, str] | None = None) -> int:
    """The evaluated model's reply cap in bytes: ``MEDEVAL_MODEL_MAX_REPLY_MB`` megabytes, default 64."""
    value = (os.environ if environ is None else environ).get(MODEL_REPLY_ENV, "").strip()
    if not value:
        return MODEL_REPLY_DEFAULT_MB * 2**20
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0:
        raise MedevalDataError(f"{MODEL_REPLY_ENV}={value!r}: give a positive number of megabytes, e.g. 256.")
    return int(megabytes * 2**20)


def declared_too_large(headers: Mapping[str, str], limit: int) -> bool:
    """The reply announces more than ``limit`` bytes (its Content-Length): refused before reading."""
    try:
        return int(headers.get("Content-Length") or 0) > limit
    except ValueError:
        return False


class Unpacker:
    """Unpacks a reply body chunk by chunk, never producing more than ``limit`` bytes in all."""

    def __init__(self, encoding: str | None, limit: int, what: str = "reply", setting: str | None = None) -> None:
        encoding = (encoding or "identity").strip().lower()
        if encoding in ("gzip", "x-gzip"):
            self._decoder: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = _Deflate()
        elif encoding == "identity":
            self._decoder = None
        else:
            raise MedevalDataError(
                f"the {what} uses the content encoding {encoding!r}, which the pack does not "
                f"read (it asks for {ACCEPT_ENCODING})."
            )
        self.limit, self.what, self.setting = limit, what, setting
        self.parts: list[bytes] = []
        self.size = 0

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise ReplyTooLarge(self.limit, self.what, self.setting)
        self.parts.append(data)

    def feed(self, chunk: bytes) -> None:
        if self._decoder is None:
            self._keep(chunk)
            return
        data = self._decoder.decompress(chunk, self.limit - self.size + 1)
        self._keep(data)
        while self._decoder.unconsumed_tail:  # more output pending from this chunk: still within the cap
            self._keep(self._decoder.decompress(self._decoder.unconsumed_tail, self.limit - self.size + 1))

    def finish(self) -> bytes:
        if self._decoder is not None:
            self._keep(self._decoder.flush())
        return b"".join(self.parts)


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (some servers) raw."""

    def __init__(self) -> None:
        self._inner: Any = None

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._inner is None:
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if data[:1] and data[0] & 0x0F == 8 else -zlib.MAX_WBITS)
        return self._inner.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inner.unconsumed_tail if self._inner is not None else b""

    def flush(self) -> bytes:
        return self._inner.flush() if self._inner is not None else b""


def read_capped(
    chunks: Any, encoding: str | None, limit: int, what: str = "reply", setting: str | None = None
) -> bytes:
    """The unpacked body from an iterable of raw ``chunks``; at most ``limit`` bytes read and kept."""
    unpacker = Unpacker(encoding, limit, what, setting)
    received = 0
    for chunk in chunks:
        received += len(chunk)
        if received > limit:
            raise ReplyTooLarge(limit, what, setting)
        unpacker.feed(chunk)
    return unpacker.finish()


async def read_capped_async(response: Any, limit: int, what: str = "reply", setting: str | None = None) -> bytes:
    """The same for an aiohttp response of a session made with ``auto_decompress=False``."""
    if declared_too_large(response.headers, limit):
        raise ReplyTooLarge(limit, what, setting)
    unpacker = Unpacker(response.headers.get("Content-Encoding"), limit, what, setting)
    received = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        received += len(chunk)
        if received > limit:
            raise ReplyTooLarge(limit, what, setting)
        unpacker.feed(chunk)
    return unpacker.finish()


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def redirect_target(url: str, status: int, headers: Mapping[str, str]) -> str | None:
    """Where a redirect reply points (absolute), or None when the reply is not a redirect."""
    location = headers.get("Location")
    return urljoin(url, location) if status in REDIRECT_STATUS and location else None


def headers_for_hop(headers: Mapping[str, str], from_url: str, to_url: str) -> dict[str, str]:
    """The headers to send on a redirect from ``from_url`` to ``to_url``: all of them within one
    origin, only ``ACCEPTED_HEADERS`` to another."""
    if origin(from_url) == origin(to_url):
        return dict(headers)
    return {name: value for name, value in headers.items() if name.lower() in ACCEPTED_HEADERS}


def with_accept_encoding(headers: Mapping[str, str] | None) -> dict[str, str]:
    """``headers`` asking for the encodings the pack unpacks, unless they name their own."""
    out = dict(headers or {})
    if not any(name.lower() == "accept-encoding" for name in out):
        out["Accept-Encoding"] = ACCEPT_ENCODING
    return out
