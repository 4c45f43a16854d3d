"""nodewatch: fault injection (FINJ) and fault classification (Netti et al.), see docs/finj.md."""
