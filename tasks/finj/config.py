"""The ``[finj]`` settings section (TOML ``[finj]``, env ``NODEWATCH_FINJ='{json}'``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FinjSettings(BaseModel):
    """Fault injection limits and the nightly fault-classification step."""

    model_config = ConfigDict(extra="forbid")

    max_task_s: float = Field(3600.0, gt=0, le=86400, description="hard time limit of any task (s)")
    mem_cap_mib: int = Field(
        2048, ge=16, le=1 << 20, description="memory cap of a fault program (MiB; also the fault cgroup's limit)"
    )
    disk_cap_mib: int = Field(
        512, ge=1, le=1 << 20, description="largest file a fault/application writes under the campaign's scratch dir (MiB)"
    )
    nightly: bool = Field(True, description="run the nightly 'finj' step (needs a model trained on staged telemetry)")
    min_confidence: float = Field(
        0.5, ge=0, le=1, description="a flagged node gets a fault class only at this mean confidence or more"
    )
    model_run: str | None = Field(None, description="run id of the classifier to use (default models/finj/CURRENT)")


def finj_settings(settings: object) -> FinjSettings:
    """The validated ``[finj]`` section of ``settings``."""
    from nodewatch.tasks.core.settings import section

    return section(settings, "finj", FinjSettings)
