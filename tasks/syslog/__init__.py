"""Syslog analytics (issue 17): templates, PaRS anonymisation, filtering, outages, vicinity detector."""
