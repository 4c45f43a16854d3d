"""Checkpoint-interval and failure-model math (Frank, ch. 3): pure numpy/scipy."""
