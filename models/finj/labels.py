"""Window labels (Netti et al., Sec. 6 "Labeling"): *mode* (the majority label of the 60-s window), *recent*
(the label of its last second), and *ambiguous* (more than one label inside the window)."""

from __future__ import annotations

import numpy as np


def window_labels(per_second: np.ndarray, ends: np.ndarray, window: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mode, recent, ambiguous)`` for windows ending at rows ``ends`` of the integer label array ``per_second``.

    Ties in *mode* go to the lowest label code (callers give ``healthy`` code 0, so a 30/30 window is
    healthy). Vectorised: one bincount per label over a sliding view."""
    lab = np.asarray(per_second, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    k = int(lab.max()) + 1 if lab.size else 1
    view = np.lib.stride_tricks.sliding_window_view(lab, window)[ends - (window - 1)]  # (n, window)
    counts = np.stack([(view == c).sum(axis=1) for c in range(k)], axis=1)  # (n, k)
    mode = counts.argmax(axis=1)
    recent = lab[ends]
    ambiguous = (counts > 0).sum(axis=1) > 1
    return mode, recent, ambiguous
