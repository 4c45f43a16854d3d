"""Parsers and the generic ingest pipeline (land raw -> parse -> validate -> dedupe -> stage)."""
