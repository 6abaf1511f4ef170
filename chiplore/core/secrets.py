"""Secrets never leave chiplore in a message: a value known to be secret (an API key, a database
password) and the usual shapes of credentials (a bearer token, a password inside a URI) are masked
in any text before it is printed, logged or written to the graph."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
URI_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@")
SECRET_QUERY = re.compile(r"(?i)([?&](?:password|passwd|pwd|secret|token|credentials)=)[^&#\s]*")
KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_-]{12,}")  # OpenAI-style keys, even ones chiplore was never told of
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)


def secrets_from_environment(names: Iterable[str] = ()) -> list[str]:
    """The values of every environment variable whose name says it holds a secret (`*_API_KEY`,
    `*_TOKEN`, `*_PASSWORD`, ...) and of `names`, where set."""
    chosen = {name for name in os.environ if SECRET_NAME.search(name)} | set(names)
    values = [os.environ.get(name, "") for name in chosen]
    return [value for value in values if len(value) >= 4]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value, bearer token, URI password and key-shaped string masked."""
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = URI_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = SECRET_QUERY.sub(rf"\g<1>{MASK}", text)
    return KEY_SHAPED.sub(MASK, text)


def redact_uri(uri: str) -> str:
    """The URI with any password in it (user:password@, ?password=) masked: how an address is shown."""
    try:
        parts = urlsplit(uri)
        if parts.password is not None:
            host = parts.netloc.rpartition("@")[2]
            uri = urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}"))
    except ValueError:
        pass
    return redact(uri)


def uri_password(uri: str) -> str:
    """The password a URI carries, or an empty string (so that messages can mask it anywhere)."""
    try:
        return urlsplit(uri).password or ""
    except ValueError:
        match = URI_PASSWORD.search(uri)
        return match["password"] if match else ""
