"""evobench: the application package (the ``bench`` command line) above the libraries."""
