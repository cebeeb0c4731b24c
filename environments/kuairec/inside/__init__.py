"""KuaiRec code that runs INSIDE the candidate's sandbox (``driver``); see ``harness/inside``.

Shipped as source text (hashed with the family) and written next to the candidate, so each module
here is self-contained: standard library, numpy and torch only (``tests/harness/test_inside_boundary.py``).
"""
