"""The ``switchboard`` command line (also ``python -m gateway``)."""

from gateway.cli.main import main

__all__ = ["main"]
