"""SaNSA node states and failures from staged syslog, jobs, reservations and topology."""
