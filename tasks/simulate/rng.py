"""Deterministic random streams: one numpy Generator per (seed, stream, key...) via SeedSequence spawn keys.

A stream never depends on how many other streams were drawn, so the same (seed, day, batch) renders the
same bytes whatever range of days or batches a run covers, in whatever order.
"""

from __future__ import annotations

import numpy as np

STREAMS = {
    "topology": 1, "failures": 2, "rack_events": 3, "maintenance": 4, "anomalies": 5, "connloss": 6,
    "outages": 7, "jobs": 8, "fp_alerts": 9, "telemetry": 10, "syslog": 11, "controller": 12, "alerts": 13,
    "precursors": 14, "rack_outages": 15, "heterogeneity": 16, "boot": 17, "syslog_precursors": 18,
}


def rng(seed: int, stream: str, *key: int) -> np.random.Generator:
    """Generator for ``stream`` and integer ``key`` (e.g. node index, day ordinal, batch index)."""
    ss = np.random.SeedSequence(int(seed), spawn_key=(STREAMS[stream], *(int(k) for k in key)))
    return np.random.Generator(np.random.PCG64(ss))
