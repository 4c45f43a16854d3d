"""One settings object for the whole application.

Precedence (highest first): explicit keyword arguments (CLI flags), environment variables
``NODEWATCH_*``, a TOML file, then the defaults below. The TOML file is, in this order, the
``config`` argument of :func:`load_settings`, the CLI's ``--config`` (registered with
:func:`set_default_config`), or the file named by the environment variable ``NODEWATCH_CONFIG``.
:func:`load_settings` reads the file itself (no environment variable is written); a missing file
raises :class:`FileNotFoundError`, a file that is not valid TOML, names an unknown setting or holds
an invalid value raises :class:`SettingsError` naming the file.

User hashing (``hash_users``, **on by default**): the ``user``, ``group`` and ``cancelled_by`` columns
of the staged ``jobs`` table are replaced by a keyed hash of the value (see
:func:`nodewatch.tasks.ingest.jobs.keyed_hash`). The key is the store's own key file
``keys/user-hash.key`` (32 random bytes, mode 0600, created at first use by
:func:`nodewatch.tasks.ingest.run.user_hash_key`), unless ``hash_salt`` is set: a configured salt
wins. ``hash_salt`` is a secret: set it in the environment (``NODEWATCH_HASH_SALT``) or in a TOML
file kept out of version control, never in code, on the command line or in a flow parameter; a salt
shorter than :data:`MIN_SALT_CHARS` characters is refused. ``hash_users = false`` (CLI
``--no-hash-users``) is the explicit opt-out that stages names in clear.
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import BaseModel, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

MIN_SALT_CHARS = 16
"""Shortest accepted ``hash_salt`` when ``hash_users`` is on (user names are guessable: the salt is the secret)."""


_M = TypeVar("_M", bound=BaseModel)


class SettingsError(ValueError):
    """Settings that cannot be used: invalid TOML file, unknown setting, invalid value (one-line message)."""


class Settings(BaseSettings):
    """Runtime configuration of nodewatch (build it with :func:`load_settings`)."""

    model_config = SettingsConfigDict(env_prefix="NODEWATCH_", extra="ignore")

    store: str = Field("./nodewatch-data", description="fsspec URL of the store root")
    hash_users: bool = Field(
        True,
        description="replace user/group (and cancelled_by) of staged jobs by a keyed hash (HMAC-SHA256); "
        "default on, false = explicit opt-out (names staged in clear)",
    )
    hash_salt: SecretStr = Field(
        SecretStr(""),
        description=f"secret key of user hashing (>= {MIN_SALT_CHARS} chars; empty = the store's key file "
        "keys/user-hash.key, created at first use): env NODEWATCH_HASH_SALT or TOML, never code",
    )
    step: str = Field("15min", description="aggregation step of the telemetry cube")
    dask_address: str | None = Field(None, description="address of an existing Dask scheduler")
    dask_workers: int = Field(2, description="workers of the default LocalCluster")
    node_batch: int = Field(50, description="nodes per batch for aggregation, training and scoring")
    max_cube_nodes: int = Field(100_000, gt=0, description="cube builds refuse staged data naming more distinct nodes")
    future_tolerance_s: int = Field(300, description="rows more than this many seconds in the future are rejected")
    data_docs: bool = Field(True, description="write a Great Expectations Data Docs site per run")
    follow_symlinks: bool = Field(
        False,
        description="take input symlinks that resolve to regular files under the given paths (default: refuse every link)",
    )
    max_decompressed_bytes: int = Field(
        64 << 30, gt=0, description="a compressed input decompressing to more bytes is quarantined (also the disk spool cap)"
    )
    max_compression_ratio: float = Field(
        1000.0, gt=1, description="a compressed input decompressing at a higher ratio (checked after 64 MiB) is quarantined"
    )
    service_hosts: list[str] = Field(
        default_factory=list,
        description="non-compute hosts whose rows are accepted (e.g. the Slurm controller); env: JSON list",
    )

    # Capability sections: a TOML table ``[syslog]`` etc. (env: JSON, e.g. NODEWATCH_ALERTS='{"push": true}').
    # Each capability validates its own section with :func:`section` and its own pydantic model, so a new
    # setting of one capability is an edit in that capability's folder only.
    syslog: dict[str, Any] = Field(default_factory=dict, description="syslog analytics section (tasks/syslog)")
    predict: dict[str, Any] = Field(default_factory=dict, description="failure prediction section (tasks/predict)")
    finj: dict[str, Any] = Field(default_factory=dict, description="fault injection / classification section (tasks/finj)")
    coalloc: dict[str, Any] = Field(default_factory=dict, description="co-allocation what-if section (tasks/coalloc)")
    alerts: dict[str, Any] = Field(default_factory=dict, description="alert publishing section (tasks/alerts)")
    cluster: dict[str, Any] = Field(default_factory=dict, description="scale-out engines section (Slurm/Dask/S3)")

    @model_validator(mode="after")
    def _salt_for_hashing(self) -> Self:
        salt = self.hash_salt.get_secret_value()
        if salt and len(salt) < MIN_SALT_CHARS:
            raise ValueError(
                f"hash_salt is shorter than {MIN_SALT_CHARS} characters: set a longer NODEWATCH_HASH_SALT (or hash_salt "
                "in the TOML file, never in code), or leave it empty to use the store's key file keys/user-hash.key"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """CLI/init args > env > TOML file (the one :func:`load_settings` read) > defaults."""
        toml = _TOML_SOURCE.get()
        return (init_settings, env_settings) if toml is None else (init_settings, env_settings, toml)


_TOML_SOURCE: ContextVar[TomlConfigSettingsSource | None] = ContextVar("nodewatch_toml_source", default=None)
"""The TOML source of the :class:`Settings` being built by :func:`load_settings` (set only during the call)."""

_default_config: Path | None = None


def set_default_config(config: Path | None) -> None:
    """Use ``config`` as the TOML file of later :func:`load_settings` calls that pass none (the CLI's
    ``--config``, so that flows run by the CLI see it); ``None`` clears it."""
    global _default_config
    _default_config = Path(config) if config is not None else None


def config_path(config: Path | None = None) -> Path | None:
    """The TOML file to read: ``config``, else the CLI's ``--config``, else ``$NODEWATCH_CONFIG``, else none."""
    if config is not None:
        return Path(config)
    if _default_config is not None:
        return _default_config
    env = os.environ.get("NODEWATCH_CONFIG")
    return Path(env) if env else None


def toml_source(path: Path) -> TomlConfigSettingsSource:
    """The settings source of TOML file ``path``, checked: it exists, parses and names only known settings."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        source = TomlConfigSettingsSource(Settings, toml_file=path)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"config file {path} is not valid TOML: {e}") from None
    unknown = sorted(set(source.toml_data) - set(Settings.model_fields))
    if unknown:
        raise SettingsError(
            f"config file {path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(Settings.model_fields)}"
        )
    return source


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build settings; ``config`` is a TOML file (see :func:`config_path`), ``overrides`` are CLI flags
    (``None`` values ignored)."""
    path = config_path(config)
    token = _TOML_SOURCE.set(toml_source(path) if path is not None else None)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        where = f" (config file {path})" if path is not None else ""
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'settings'}: {err['msg']}" for err in e.errors())
        raise SettingsError(f"invalid settings{where}: {problems}") from None
    finally:
        _TOML_SOURCE.reset(token)


def section(settings: Settings, name: str, model: type[_M]) -> _M:
    """The capability section ``name`` of ``settings`` validated by ``model`` (a pydantic model whose
    ``model_config`` should forbid extra keys); an invalid or unknown key is a one-line :class:`SettingsError`."""
    raw = getattr(settings, name)
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{name}.{'.'.join(map(str, err['loc'])) or name}: {err['msg']}" for err in e.errors())
        raise SettingsError(f"invalid settings: {problems}") from None
