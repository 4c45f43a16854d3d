"""Shape and strength of the failure precursors in the simulated telemetry (the predictor's knob, issue 18).

A failure with a precursor has a window ``[a, b)`` = ``[t_fail - lead, t_fail)`` (lead: ``precursor_median_s``,
``precursor_sigma``, ``precursor_min_s``, ``precursor_max_s``) in which its cause leaves a trace in the
telemetry: extra error-counter rates (``edac_burst``: EDAC CE, ``ib_errors``: InfiniBand errors and link-downs),
a write slow-down (``io_errors``) and gauge overlays (``mce_thermal``: CPU temperature and throttling,
``inlet_heating``: inlet temperature, ``psu_fluctuation``: node-power noise, ``soft_lockup``: system time and
load). :class:`PrecursorShape` says how strong that trace is and how it evolves inside the window:

* ``ramp`` (default, the simulator's original behaviour): gauge overlays grow linearly from 0 at the onset
  to ``strength`` at the failure; counter rates are raised by ``strength`` x their base increment for the
  whole window (the cumulative counter ramps);
* ``step``: gauge overlays jump to ``strength`` at the onset; counter rates as for ``ramp``;
* ``oscillation``: gauges and counter rates switch on and off every half ``period_s`` (an intermittent fault),
  gauges with a ramping amplitude.

``strength`` 1 with ``ramp`` renders the same bytes as before the knob existed; 0 removes the telemetry trace
(the failure keeps its truth row and its syslog burst).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRECURSOR_SHAPES = ("ramp", "step", "oscillation")
"""Allowed values of ``SimConfig.precursor_shape``."""


@dataclass(frozen=True)
class PrecursorShape:
    """How a precursor window shows in the telemetry: shape, strength (amplitude factor), oscillation period."""

    shape: str = "ramp"
    strength: float = 1.0
    period_s: float = 600.0

    def __post_init__(self) -> None:
        if self.shape not in PRECURSOR_SHAPES:
            raise ValueError(f"precursor_shape must be one of {', '.join(PRECURSOR_SHAPES)}, got {self.shape!r}")
        if not (np.isfinite(self.strength) and 0.0 <= self.strength <= 10.0):
            raise ValueError(f"precursor_strength must be in [0, 10], got {self.strength}")
        if not (np.isfinite(self.period_s) and 30.0 <= self.period_s <= 86400.0):
            raise ValueError(f"precursor_period_s must be in [30, 86400], got {self.period_s}")

    def _on(self, t: np.ndarray, a: float) -> np.ndarray:
        """1 in the first half of every period from ``a``, else 0."""
        return (np.mod(np.asarray(t, float) - a, self.period_s) < self.period_s / 2).astype(float)

    def gauge(self, t: np.ndarray, a: float, b: float) -> np.ndarray:
        """Gauge overlay intensity at times ``t``: 0 outside ``[a, b)``, up to ``strength`` inside."""
        t = np.asarray(t, float)
        inside = (t >= a) & (t < b)
        if self.shape == "step":
            base = inside.astype(float)
        else:
            base = np.where(inside, (t - a) / max(b - a, 1.0), 0.0)
            if self.shape == "oscillation":
                base = base * self._on(t, a)
        return base * self.strength if self.strength != 1.0 else base

    def rate_breakpoints(self, a: float, b: float) -> np.ndarray:
        """Extra breakpoints of the piecewise-constant driver rates inside ``[a, b)`` (on/off switches)."""
        if self.shape != "oscillation" or b <= a:
            return np.array([a, b])
        return np.append(np.arange(a, b, self.period_s / 2), b)

    def rate(self, mid: np.ndarray, a: float) -> np.ndarray:
        """Factor of a counter-rate precursor at driver-piece midpoints ``mid`` inside the window (0 or ``strength``)."""
        on = self._on(mid, a) if self.shape == "oscillation" else np.ones(len(np.atleast_1d(mid)))
        return on * self.strength
