"""One settings object for the whole application.

Precedence (highest first): explicit keyword arguments (CLI flags), environment variables
``NODEWATCH_*``, a TOML file (``--config`` or ``NODEWATCH_CONFIG``), then the defaults below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


class Settings(BaseSettings):
    """Runtime configuration of nodewatch."""

    model_config = SettingsConfigDict(env_prefix="NODEWATCH_", extra="ignore")

    store: str = Field("./nodewatch-data", description="fsspec URL of the store root")
    hash_users: bool = Field(False, description="replace user/group names by a salted sha256 when staging")
    hash_salt: str = Field("", description="salt for user hashing (set via env, never commit it)")
    step: str = Field("15min", description="aggregation step of the telemetry cube")
    dask_address: str | None = Field(None, description="address of an existing Dask scheduler")
    dask_workers: int = Field(2, description="workers of the default LocalCluster")
    node_batch: int = Field(50, description="nodes per batch for aggregation, training and scoring")
    future_tolerance_s: int = Field(300, description="rows more than this many seconds in the future are rejected")
    data_docs: bool = Field(True, description="write a Great Expectations Data Docs site per run")
    service_hosts: list[str] = Field(
        default_factory=list,
        description="non-compute hosts whose rows are accepted (e.g. the Slurm controller); env: JSON list",
    )

    _toml_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """CLI/init args > env > TOML file > defaults."""
        toml_path = os.environ.get("NODEWATCH_CONFIG")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build settings; ``config`` is a TOML file, ``overrides`` are CLI flags (``None`` values ignored)."""
    if config is not None:
        if not Path(config).is_file():
            raise FileNotFoundError(f"config file {config} does not exist")
        os.environ["NODEWATCH_CONFIG"] = str(config)
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
