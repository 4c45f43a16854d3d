"""``python -m flows.cli`` is the same as the ``nodewatch`` console script."""

from flows.cli import main

main()
