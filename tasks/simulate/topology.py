"""Machine-room layout: node -> rack, row, chassis, position, architecture (static, from the seed)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nodewatch.tasks.simulate.config import SimConfig


@dataclass(frozen=True)
class Topology:
    """Static layout arrays indexed by node index (0-based)."""

    names: tuple[str, ...]
    rack: np.ndarray
    row: np.ndarray
    chassis: np.ndarray
    position: np.ndarray
    arch: tuple[str, ...]

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.names)

    def rack_name(self, r: int) -> str:
        """Rack label used in files and syslog group names, e.g. ``r07``."""
        return f"r{r:02d}"

    def nodes_of_rack(self, r: int) -> np.ndarray:
        """Node indices in rack ``r``."""
        return np.flatnonzero(self.rack == r)


def build_topology(cfg: SimConfig) -> Topology:
    """Lay out ``cfg.n_nodes`` nodes in racks of ``nodes_per_rack``; architectures by contiguous rack blocks."""
    idx = np.arange(cfg.n_nodes)
    rack = idx // cfg.nodes_per_rack
    pos = idx % cfg.nodes_per_rack
    chassis = pos // cfg.nodes_per_chassis
    row = rack // cfg.racks_per_row
    n_racks = cfg.n_racks
    shares = np.array([s for _, s in cfg.architectures], dtype=float)
    bounds = np.round(np.cumsum(shares / shares.sum()) * n_racks).astype(int)
    rack_arch = np.searchsorted(bounds, np.arange(n_racks), side="right").clip(0, len(shares) - 1)
    arch = tuple(cfg.architectures[rack_arch[r]][0] for r in rack)
    return Topology(tuple(cfg.node_name(i) for i in idx), rack, row, chassis, pos, arch)
