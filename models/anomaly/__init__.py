"""Anomaly-detection math (RUAD and baselines, Molan et al.): pure numpy/torch/sklearn."""
