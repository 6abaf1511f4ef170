"""Credentials never reach a message: URIs are shown with their password masked."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# user:password@ inside anything that looks like an address, for text urlsplit cannot take apart.
_USERINFO = re.compile(r"(//[^/@\s:]*):[^/@\s]*@")
_SECRET_QUERY = re.compile(r"(?i)([?&](?:password|passwd|pwd|secret|token|credentials)=)[^&#\s]*")


def redact_uri(uri: str) -> str:
    """The URI with any password in it (user:password@, ?password=) replaced by ***."""
    try:
        parts = urlsplit(uri)
        netloc = parts.netloc
        if parts.password is not None:
            host = netloc.rpartition("@")[2]
            netloc = f"{parts.username or ''}:{MASK}@{host}"
        uri = urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        pass
    return _SECRET_QUERY.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>:{MASK}@", uri))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """A message with URIs' passwords and each given secret masked (a driver may quote either)."""
    text = _SECRET_QUERY.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>:{MASK}@", text))
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def uri_password(uri: str) -> str:
    """The password a URI carries, or an empty string (so that messages can mask it anywhere)."""
    try:
        return urlsplit(uri).password or ""
    except ValueError:
        match = _USERINFO.search(uri)
        return match.group(0).rsplit(":", 1)[-1].rstrip("@") if match else ""
