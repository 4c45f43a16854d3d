"""Helpers of the scale-out tests: re-exported from ``tests/localcluster.py`` (shared by every test folder)."""

from __future__ import annotations

from localcluster import BIN, REPO, SCRIPT, Api, LocalCluster, free_port, read_env, stop

__all__ = ["BIN", "REPO", "SCRIPT", "Api", "LocalCluster", "free_port", "read_env", "stop"]
