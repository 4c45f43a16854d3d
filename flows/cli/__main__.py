"""``python -m nodewatch.flows.cli`` is the same as the ``nodewatch`` console script."""

from nodewatch.flows.cli import main

main()
