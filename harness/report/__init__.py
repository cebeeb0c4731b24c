"""Figures and self-contained HTML reports of runs and variants."""
