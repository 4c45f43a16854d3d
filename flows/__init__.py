"""nodewatch: flows."""
