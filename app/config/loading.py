"""Loading: the YAML file, then the environment, then the command line's overrides,
and each error in one line that names the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from app import safeyaml
from app.config.checks import ConfigError
from app.config.settings import Settings


class _FileSource(PydanticBaseSettingsSource):
    """The YAML file's contents, as a settings source below the environment."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def parse_target_flag(flag: str) -> dict[str, str]:
    """Turn ``NAME=URL`` into a target mapping."""
    name, sep, url = flag.partition("=")
    if not sep or not name or not url:
        raise ConfigError(f"--target {flag!r}: expected NAME=URL")
    return {"name": name, "url": url}


def _format_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"config error in {source}: {loc}: {first['msg']}{more}"


def _source(path: str | Path | None) -> str:
    return "environment" if path is None else str(path)


def field_error(path: str | Path | None, loc: str, message: str) -> ConfigError:
    """The error of a check run on loaded settings by the layer that knows the field's
    meaning (the rule file: ``app.alerts.rules.check_rule_files``), worded as a check
    run while loading would be: ``config error in FILE: alerts: Value error, …``."""
    return ConfigError(f"config error in {_source(path)}: {loc}: Value error, {message}")


def load_settings(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Load settings from an optional YAML file, the environment and CLI overrides."""
    data: dict[str, Any] = {}
    source = _source(path)
    if path is not None:
        try:
            raw = safeyaml.load(Path(path).read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError(f"config error: cannot read {path}: {exc.strerror}") from exc
        except safeyaml.YamlError as exc:  # one line: FILE:LINE:COLUMN: not valid YAML: …
            raise ConfigError(f"config error in {exc}") from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"config error in {path}: the top level must be a mapping")
        data = raw

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # Command-line overrides, then the environment, then the file.
            return (init_settings, env_settings, _FileSource(settings_cls, data))

    try:
        loaded = _Loaded(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source)) from exc
    return Settings.model_construct(**dict(loaded))
