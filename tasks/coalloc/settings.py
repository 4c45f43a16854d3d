"""The ``[coalloc]`` settings section (TOML table ``[coalloc]``, env ``NODEWATCH_COALLOC='{json}'``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CoallocSettings(BaseModel):
    """Defaults of ``nodewatch coalloc`` (command-line options override them)."""

    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(512, ge=1, le=1_000_000, description="nodes of the replayed machine (thesis: 512)")
    cores_per_node: int = Field(32, ge=1, le=4096, description="physical cores per node (thesis: 32)")
    min_saving: float = Field(0.10, ge=-1.0, le=1.0, description="derived twin rule: forbid pairs saving less")
    seeds: int = Field(5, ge=1, le=1000, description="synthetic queues per setup (CI over seeds)")
    jobs: int = Field(4096, ge=1, le=10_000_000, description="jobs of a synthetic queue (thesis: 4,096)")
    horizon_s: float | None = Field(3600.0, gt=0, description="synthetic replays: count jobs finished by then (thesis: 1 h)")


def coalloc_settings(settings: object) -> CoallocSettings:
    """The validated section of ``settings`` (a one-line SettingsError if a key is unknown or invalid)."""
    from nodewatch.tasks.core.settings import section

    return section(settings, "coalloc", CoallocSettings)  # type: ignore[arg-type]
