"""The nightly report: what each step did, alerts, precision/recall against ground truth."""
