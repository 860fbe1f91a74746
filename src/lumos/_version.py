"""The installed lumos version (single source: the package metadata)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lumos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
