"""The ``lumos`` command line: a thin layer that parses, calls the public API and writes outputs."""
