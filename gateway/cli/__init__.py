"""The ``switchboard`` command line (also ``python -m gateway``); it starts in
:mod:`gateway.cli.entry`, which imports nothing that may be missing."""
