"""Simulated HPC cluster writing real formats with ground truth (issue 5)."""
