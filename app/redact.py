"""Credentials in URLs, kept out of everything phasewatch shows.

A target or Prometheus URL may carry a password (``http://user:pass@host/…``) or a key
in its query (``?token=…``); httpx sends the first as basic auth, so it works, but the
URL itself must never reach a page, an API answer, an error message or a log line.
:func:`redact_url` is the one place that hides them; :func:`url_secrets` lists them for
the log filter (:class:`app.logs.RedactFilter`), the backstop for any stray line.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MASK", "redact_url", "url_secrets"]

MASK = "***"

# ``scheme://user:password@``: the password runs to the last ``@`` of the authority
# (an unencoded ``@`` in a password is common and urlsplit reads it the same way).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*):(?P<pw>[^/?#\s]+)@")
# ``?token=…`` / ``&api_key=…``: query parameters whose name says they hold a secret.
_SECRET_PARAM = re.compile(
    r"(?P<head>[?&;][^=&#\s]*(?:token|key|password|passwd|secret|auth)[^=&#\s]*=)"
    r"(?P<value>[^&#\s]+)",
    re.IGNORECASE,
)


def redact_url(text: str) -> str:
    """``http://user:pass@host/x?token=t`` → ``http://user:***@host/x?token=***``.

    Works on a URL or on any text that contains URLs (an error message, a log line).
    The user name stays (it names who, not the secret); a URL without a password or a
    secret parameter comes back unchanged, and so does an empty password
    (``http://user:@host``).
    """
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m['head']}{MASK}", text)


def url_secrets(text: str) -> set[str]:
    """The passwords and secret query values in ``text``'s URLs, as written and decoded."""
    found: set[str] = set()
    for m in _USERINFO.finditer(text):
        found |= {m["pw"], unquote(m["pw"])}
    for m in _SECRET_PARAM.finditer(text):
        found |= {m["value"], unquote(m["value"])}
    return found
