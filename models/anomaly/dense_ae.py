"""Dense autoencoder baseline, the previous state of the art (Borghesi et al. [5]; RUAD Section 3.5, Eq. 6, Fig. 1a).

Per node, a fully connected autoencoder I -> E1 -> L -> D1 -> I (16, 8, 16 for I = 462, Section 4.3,
scaled to I) reconstructs its input vector ``x_t0`` (no temporal context, window of one step, so the
time-consistency filter does not apply, Table 4). ``mode='semi'`` is DENSE_semi (trained on normal
timestamps only), ``mode='unsupervised'`` is DENSE_un. Scoring as RUAD: Eq. 3 on the L1 error.
"""

from __future__ import annotations

from nodewatch.models.anomaly.batched_lstm import BatchedDenseNet
from nodewatch.models.anomaly.ruad import AutoencoderEstimator


class DenseAutoencoder(AutoencoderEstimator):
    """Per-node dense autoencoder (Section 3.5). ``window`` is accepted for API symmetry and ignored (W = 1)."""

    _net_class = BatchedDenseNet
    _windowed = False
