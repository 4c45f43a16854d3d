"""nodewatch: models."""
