"""Reporting: markdown and HTML reports and plots rendered from scored results."""
