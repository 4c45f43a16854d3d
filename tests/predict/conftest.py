"""Fixtures of the failure-prediction tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """For modules whose networks and voters are tiny (``pytestmark = pytest.mark.usefixtures(...)``): a second
    intra-op thread only adds contention (40x slower on a loaded 2-core machine); restored after the module."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
