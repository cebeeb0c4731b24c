"""MLA-Decode code that runs INSIDE the candidate's sandbox: GPU MODE's objects and the submission loader.

Shipped as source text inside the candidate's ``candidate.py`` (see ``environments/mla_decode/adapter.py``),
so each module here is self-contained: standard library and torch only
(``tests/harness/test_inside_boundary.py``).
"""
