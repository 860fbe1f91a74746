"""Execution graphs: the data model (:mod:`lumos.graph.model`), validation, algorithms, edits."""
