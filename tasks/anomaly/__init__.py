"""Per-node anomaly models: training, the model registry, labels, nightly scoring."""
