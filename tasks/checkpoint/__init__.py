"""Failure-aware checkpoint-interval tables: job shapes, failure fits, tables."""
