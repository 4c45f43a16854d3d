"""Syslog analytics math (Ghiasvand & Ciorba; Loghub parsing metrics): pure numpy/sklearn, no I/O."""
