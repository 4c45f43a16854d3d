"""Capability steps of the nightly flow (tasks/core/nightly_steps.py) and capability settings sections."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from nodewatch.flows import nightly as nightly_flow
from nodewatch.tasks.core import nightly_steps
from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext
from nodewatch.tasks.core.runs import RunRecorder, load_manifest
from nodewatch.tasks.core.settings import SettingsError, load_settings, section
from nodewatch.tasks.core.store import Store


def test_discover_returns_sorted_steps() -> None:
    steps = nightly_steps.discover()
    assert all(isinstance(s, NightlyStep) for s in steps)
    assert [(s.order, s.name) for s in steps] == sorted((s.order, s.name) for s in steps)


def test_extra_steps_run_in_order_and_a_failure_never_stops_the_night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def ok(ctx: StepContext) -> dict:
        seen.append("ok")
        ctx.shared["ok"] = 42
        return {"status": "done", "details": "fine", "count": 3}

    def boom(ctx: StepContext) -> dict:
        seen.append("boom")
        raise RuntimeError("disk on fire\nsecond line")

    def later(ctx: StepContext) -> dict:
        seen.append(f"later:{ctx.shared['ok']}:{ctx.steps['boom']['status']}")
        return {"status": "done", "details": ""}

    off = NightlyStep("off", lambda ctx: {"status": "done"}, order=1, enabled=lambda s: False)
    monkeypatch.setattr(nightly_steps, "discover", lambda: [off, NightlyStep("ok", ok, 10),
                                                           NightlyStep("boom", boom, 20), NightlyStep("later", later, 90)])
    st = Store(str(tmp_path / "store"))
    rec = RunRecorder(st, "nightly", {})
    rec.write()
    steps: dict = {}
    nightly_flow._extra_steps(st, date(2026, 1, 2), None, rec, steps)
    assert seen == ["ok", "boom", "later:42:FAILED"]
    assert steps["ok"] == {"status": "done", "details": "fine"}
    assert steps["boom"] == {"status": "FAILED", "details": "disk on fire"}
    assert "off" not in steps
    m = rec.finish()
    assert m.outputs["ok"] == {"count": 3}
    assert any("boom: RuntimeError: disk on fire" in e for e in m.errors)
    assert load_manifest(st, m.run_id).outputs["ok"] == {"count": 3}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    window: str = "30min"
    push: bool = False


def test_capability_section_from_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "n.toml"
    cfg.write_text('[syslog]\nwindow = "1h"\n')
    assert section(load_settings(cfg), "syslog", _Section).window == "1h"
    assert section(load_settings(cfg), "alerts", _Section).push is False
    monkeypatch.setenv("NODEWATCH_ALERTS", '{"push": true}')
    assert section(load_settings(cfg), "alerts", _Section).push is True
    cfg.write_text('[syslog]\nwindw = "1h"\n')
    with pytest.raises(SettingsError, match=r"syslog\.windw"):
        section(load_settings(cfg), "syslog", _Section)
