"""Workloads shipped with lumos so ``lumos demo`` runs after a plain install.

* :mod:`lumos.examples.gpt`: a small GPT-style model, data-parallel or a 2-stage pipeline,
  instrumented with :func:`lumos.collect.collector` (needs torch: ``pip install 'lumos[torch]'``).

Importing this package does not import torch.
"""
