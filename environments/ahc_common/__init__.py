"""Shared trusted code of the AtCoder Heuristic Contest families (``ahc039``, ``ahc058``).

Not a family itself (it has no ``env.toml``). The families list these modules in their
``hashed_files`` so that a change here changes their variants' content hashes.

* :mod:`.native` compiles a C++ candidate inside its sandbox and runs it on many test cases in
  parallel, classifying each run as ``ok``, ``tle``, ``runtime_error`` or ``invalid_output``.
* :mod:`.batch` is the scorer base class: compile, run every case, judge the outputs, aggregate.
* :mod:`.parsing` holds strict integer-token parsing and the ``OutputRejected`` verdict.
* :mod:`.inputs` loads the pinned public input files from the data cache, checking their sha256.
"""
