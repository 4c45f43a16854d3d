"""Failure prediction (Frank, ch. 4): telemetry windows, lead-time ensemble training, registry, scoring, usability report."""
