"""The service's own sections: ``storage``, ``log``, ``server`` (where the API and UI
listen) and ``whatif`` (the twin's pricing of hints)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from app.config.checks import Strict


class StorageConfig(Strict):
    path: str = Field("phasewatch.db", description="SQLite file; ':memory:' for none")
    retention_days: float = Field(7.0, gt=0, description="history older than this is dropped")
    rollup_retention_days: float = Field(
        90.0,
        gt=0,
        description="per-minute and per-hour roll-ups older than this are dropped "
        "(never before retention_days)",
    )


class LogConfig(Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
    json_lines: bool = Field(False, description="one JSON object per log line")

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


class ServerConfig(Strict):
    host: str = Field("127.0.0.1", description="the address the API and UI listen on")
    port: int = Field(8321, ge=0, le=65535, description="the port the API and UI listen on")
    # Connections to the API and UI at once; never more than the file descriptors left
    # once one per scraped target is kept aside (app.api.connections).
    max_connections: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="API/UI connections at once; past it the oldest still sending its "
        "request head is closed",
    )
    # Seconds a connection has to send a whole request head (slow clients are closed).
    request_head_timeout: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds to send a whole request head, else the connection closes",
    )


class WhatIfConfig(Strict):
    """The what-if twin in the service: the hints' predicted effects (``app.read.effects``)."""

    hint_effects: bool = Field(
        True, description="price each problem stream's hints on its twin and show the effect"
    )
    cpu_share: float = Field(
        0.02, gt=0, le=1, description="of one core, at most, on average, for that pricing"
    )
