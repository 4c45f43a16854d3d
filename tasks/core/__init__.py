"""Shared plumbing: the store, settings, run manifests, validation, counter rates."""
