"""Switchboard's gateway: configuration, the durable message journal and the wiring.

Everything channels and the agent share lives here (messages, bus, store, errors).
Only :mod:`gateway.runtime.app` and :mod:`gateway.cli.main` know both ``channels`` and ``agent``.
"""

__version__ = "0.1.0"
