"""Failure prediction math (Frank, ch. 4): UC metric, lead-time classifier ensemble, voting."""
