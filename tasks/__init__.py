"""nodewatch: tasks."""
