"""Test-wide setup: isolated Prefect home, analytics off, small shared fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="nodewatch-prefect-")
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TORCH_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; tests using it are skipped when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data not available")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test harness (ephemeral API) for the whole session: starting one costs ~10 s."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=300):
        yield


@pytest.fixture
def store(tmp_path):
    """A fresh local store."""
    from nodewatch.tasks.core.store import Store

    return Store(str(tmp_path / "store"))
