"""nodewatch: schemas."""
