"""torchlint: a linter for PyTorch training code."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("torchlint")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
