"""The ``[alerts]`` settings section (TOML table ``[alerts]``, env ``NODEWATCH_ALERTS='{json}'``).

Read with :func:`alert_settings`; an unknown key or a bad value is a one-line
:class:`~nodewatch.tasks.core.settings.SettingsError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from nodewatch.tasks.core.settings import Settings


LABELS = ("alertname", "node", "rack", "severity", "kind", "run_id", "group", "architecture", "source")
"""Labels nodewatch sets on an alert (``extra_labels`` may not override them)."""


class DrainPolicy(BaseModel):
    """When ``nodewatch alerts drain-plan --apply`` may run ``scontrol`` (absent = never)."""

    model_config = ConfigDict(extra="forbid")

    apply: bool = Field(False, description="allow --apply at all")
    max_nodes: int = Field(4, ge=1, le=10_000, description="refuse --apply when the plan drains more nodes than this")
    min_confidence: float = Field(0.75, ge=0.0, le=1.0, description="lowest verdict confidence --apply acts on")
    scontrol: str = Field("scontrol", description="scontrol executable (name on PATH or absolute path)")


class AlertSettings(BaseModel):
    """Where verdicts are published and how."""

    model_config = ConfigDict(extra="forbid")

    alertmanager_url: str | None = Field(None, description="Alertmanager base URL, e.g. http://127.0.0.1:9093")
    timeout_s: float = Field(10.0, gt=0, le=300, description="HTTP timeout of one Alertmanager request")
    hold_hours: float = Field(36.0, gt=0, le=24 * 30,
                              description="a pushed alert stays firing this long unless the next push re-confirms or resolves it")
    report_base_url: str | None = Field(
        None, description="base URL under which the store's reports/ are served (nodewatch server start); "
                          "empty = the report's path in the store")
    textfile_dir: str | None = Field(None, description="node_exporter textfile-collector directory for nodewatch.prom")
    nightly: bool = Field(False, description="run the nightly 'alerts' step (push + metrics)")
    drain_min_confidence: float = Field(0.75, ge=0.0, le=1.0, description="lowest confidence drain-plan lists")
    drain_policy: DrainPolicy | None = None
    extra_labels: dict[str, str] = Field(default_factory=dict,
                                         description="labels added to every alert (e.g. cluster = 'm100')")
    severity_names: dict[Literal["low", "medium", "high"], str] = Field(
        default_factory=dict, description="map verdict severities to your routing's names, e.g. high = 'critical'")

    @field_validator("alertmanager_url", "report_base_url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    @field_validator("extra_labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        import re

        for k in v:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", k) or k.startswith("__"):
                raise ValueError(f"label name {k!r} is not a Prometheus label name")
            if k in LABELS:
                raise ValueError(f"label {k!r} is set by nodewatch")
        return v


def alert_settings(settings: Settings) -> AlertSettings:
    """The validated ``[alerts]`` section of ``settings``."""
    from nodewatch.tasks.core.settings import section

    return section(settings, "alerts", AlertSettings)
