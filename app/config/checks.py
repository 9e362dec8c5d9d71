"""What every section of the configuration shares: the strict model (unknown keys
refused, frozen), the error a bad value raises, and the checks of a name and a URL."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the field."""


def parsable_url(v: str) -> str:
    """``v`` if its host and port can be read, the port in 1-65535 (checked here, so a bad
    URL is a config error and not an error in every scrape round)."""
    try:
        port = urlsplit(v).port
    except ValueError as exc:
        raise ValueError(f"not a usable URL: {exc}") from None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not in 1-65535")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


NAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
