"""Credentials a backend holds, wherever they came from, and scrubbing them from text.

A key can reach a backend as an argument, from the environment (the SDKs
read ``OPENAI_API_KEY`` or a saved hub token themselves), inside a URL
(``http://user:KEY@host/v1``), in a header, or inside a client object the
caller built. Every source is collected into one :class:`Secrets`, and every
text a backend hands out (error reasons, provenance, reprs) goes through
:meth:`Secrets.scrub`. URLs lose their user info before any client sees
them, so HTTP client logs and error messages never carry it; the user info
is sent as HTTP basic auth instead.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import SecretBytes, SecretStr

from ._protocol import BackendError

__all__ = ["REDACTED", "Secrets", "clean_url", "credential_headers", "split_url_credentials", "strip_userinfo"]

REDACTED = "[redacted]"

# Header names whose values are credentials.
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.IGNORECASE)
_SCHEME = re.compile(r"^(bearer|basic|token)\s+", re.IGNORECASE)
_MIN_LEN = 4  # shorter strings would scrub ordinary words


def split_url_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without user info, user, password)``; user and password decoded."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return clean, user, password


_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@]*@")


def strip_userinfo(text: str) -> str:
    """``text`` with the user info of every URL in it removed."""
    return _USERINFO.sub(r"\1", text) if "@" in text else text


def clean_url(url: str) -> str:
    """The URL without user info (what may be shown, logged and stored)."""
    return split_url_credentials(url)[0]


def credential_headers(headers: Mapping[str, str] | None) -> list[str]:
    """The values of headers that carry credentials (Authorization, X-Api-Key, ...)."""
    return [str(v) for k, v in (headers or {}).items() if _CREDENTIAL_HEADER.search(str(k))]


# Attributes of SDK clients (OpenAI, Anthropic, ...) that hold credentials.
_CLIENT_ATTRS = ("api_key", "auth_token", "default_headers", "base_url")
_MAX_DEPTH = 4  # models hold clients hold headers: deep enough, and no cycles


def _held(name: str, value: Any, depth: int) -> Iterable[tuple[str | None, str | None]]:
    """``(secret, None)`` or ``(user, password)`` pairs held under ``name``;
    a ``(None, None)`` pair never occurs. Walks pydantic models, mappings and
    SDK clients, so a key given as a ``SecretStr`` field, a header, a URL's
    user info or inside a client the caller built is found however it came."""
    if depth > _MAX_DEPTH or value is None or isinstance(value, bool | int | float):
        return
    if isinstance(value, SecretStr | SecretBytes):
        secret = value.get_secret_value()
        yield (secret.decode("utf-8", "replace") if isinstance(secret, bytes) else secret), None
    elif isinstance(value, str):
        _, user, password = split_url_credentials(value) if "@" in value else (value, None, None)
        if password or user:
            yield user, password or ""
        elif _CREDENTIAL_HEADER.search(name) and "name" not in name.lower():
            yield value, None
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and (_CREDENTIAL_HEADER.search(k) or not isinstance(v, str)):
                yield from _held(k, v, depth + 1)
            elif isinstance(v, str) and "@" in v:  # a URL under any key
                yield from _held(k, v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _held(name, v, depth + 1)
    else:
        fields = getattr(type(value), "model_fields", None)
        names = list(fields) if isinstance(fields, Mapping) else []
        for attr in (*names, *_CLIENT_ATTRS):
            try:
                v = getattr(value, attr, None)
            except Exception:  # a property that fails is no credential
                continue
            if v is not None and v is not value:
                yield from _held(attr, v if attr != "base_url" else str(v), depth + 1)
        for attr in ("root_client", "root_async_client", "_client", "_async_client"):
            # LangChain models keep their SDK clients in private attributes.
            v = value.__dict__.get(attr) if hasattr(value, "__dict__") else None
            if v is not None and attr not in names:
                yield from _held(attr, v, depth + 1)


def _forms(value: str) -> Iterable[str]:
    """A credential and the forms a server may echo it in."""
    yield value
    bare = _SCHEME.sub("", value).strip()
    yield bare
    try:  # a basic-auth value: its decoded user:password and the password alone
        decoded = base64.b64decode(bare, validate=True).decode("utf-8")
    except ValueError:
        return
    if ":" in decoded:
        yield decoded
        yield decoded.partition(":")[2]


class Secrets:
    """The credentials one backend knows of; :meth:`scrub` removes them from text."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._values: tuple[str, ...] = ()
        self.add(*values)

    def add(self, *values: str | None) -> None:
        found = set(self._values)
        for v in values:
            if v:
                found.update(f for f in _forms(str(v)) if len(f) >= _MIN_LEN)
        # Longest first, so a key is removed whole before any part of it.
        self._values = tuple(sorted(found, key=len, reverse=True))

    def add_basic_auth(self, user: str | None, password: str | None) -> None:
        """User info sent as basic auth: the password, and the header's encoded form."""
        if password:
            pair = f"{user or ''}:{password}"
            self.add(password, pair, base64.b64encode(pair.encode("utf-8")).decode("ascii"))

    def add_held(self, obj: object) -> None:
        """Every credential ``obj`` holds: secret fields, credential headers,
        URL user info, and those of the SDK clients inside it."""
        for first, second in _held("", obj, 0):
            if second is None:
                self.add(first)
            else:
                self.add_basic_auth(first, second)

    def scrub_error(self, exc: BackendError) -> BackendError:
        """``exc`` with its message scrubbed, attempts and retryability kept."""
        return BackendError(self.scrub(str(exc)), attempts=exc.attempts, retryable=exc.retryable)

    def scrub(self, text: str) -> str:
        text = strip_userinfo(text)
        for v in self._values:
            if v in text:
                text = text.replace(v, REDACTED)
        return text

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:  # never the values
        return f"Secrets({len(self._values)} values)"
