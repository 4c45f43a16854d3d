"""Test-wide setup: isolated Prefect home, analytics off, small shared fixtures."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from localcluster import LocalCluster, local_cluster_session

_PREFECT_HOME = tempfile.mkdtemp(prefix="nodewatch-prefect-")
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TORCH_NUM_THREADS", "1")
os.environ.setdefault("NODEWATCH_WARM", "0")  # no background warm worker per test CLI run (tests/test_warm.py starts its own)

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


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs("4m")`` mounts a small tmpfs and returns its path (unmounted after the test).

    Used for full-disk tests; the test is skipped with the reason when mounting is not permitted here.
    """
    import subprocess

    mounted: list[Path] = []

    def mount(size: str) -> Path:
        mnt = tmp_path / f"tmpfs-{len(mounted)}"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def fill_disk():
    """``fill_disk(dir)`` writes ``dir/filler`` until the file system is full and returns its path."""

    def fill(directory: Path) -> Path:
        filler = directory / "filler"
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        return filler

    return fill


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """The real one-host cluster of ``infra/local/cluster.sh`` (PostgreSQL, S3, Slurm), one per session."""
    yield from local_cluster_session()


_FOLDER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's duration (setup, call, teardown) to its test folder's total."""
    parts = report.nodeid.split("::", 1)[0].split("/")
    folder = "/".join(parts[:2]) if len(parts) > 2 else parts[-1]
    _FOLDER_SECONDS[folder] = _FOLDER_SECONDS.get(folder, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    """Print the test time per folder, so the CI budget (20 min on 2 cores) can be split knowingly."""
    if not _FOLDER_SECONDS:
        return
    terminalreporter.section("test time per folder")
    total = sum(_FOLDER_SECONDS.values())
    for folder, sec in sorted(_FOLDER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{sec:8.1f} s  {100 * sec / total:5.1f} %  {folder}")
