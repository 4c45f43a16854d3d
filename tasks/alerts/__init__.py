"""Publishing verdicts where operators already look: Alertmanager, Prometheus textfile metrics, Slurm drain plans.

Modules: :mod:`.config` (the ``[alerts]`` settings section), :mod:`.source` (which verdict rows, which run),
:mod:`.alertmanager` (Alertmanager v2 payload, push, resolve, state), :mod:`.metrics` (node_exporter
textfile metrics), :mod:`.drain` (``scontrol`` drain plans), :mod:`.nightly_step` (step ``alerts``,
order 90). See docs/alerting.md.
"""
