"""The wiring: builds the store, channels and agents from the configuration and runs them.

The only layer (with :mod:`gateway.cli`) that imports both ``channels`` and ``agent``:
the :class:`~gateway.runtime.app.Gateway`, the dispatcher and the turn handlers, the outbox
workers, the scheduler and heartbeat, access control and pairing.
"""
