"""``python -m lumos`` runs the CLI."""

from lumos.cli.main import main

raise SystemExit(main())
