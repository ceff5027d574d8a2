"""torchlint: a linter for PyTorch training code."""



def __getattr__(name: str) -> str:
    # Read from the installed metadata on first use: importlib.metadata costs a one-file run
    # a noticeable part of its start-up, and most runs never need the version.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    global __version__
    try:
        __version__ = version("torchlint")
    except PackageNotFoundError:  # running from a source tree that is not installed
        __version__ = "0.0.0"
    return __version__
