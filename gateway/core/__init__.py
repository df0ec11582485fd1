"""The kernel that channels and the agent share: messages, the bus and channel protocols,
errors, clock, lifecycle and small pure helpers.

Nothing here imports another layer of the gateway; ``channels/`` and ``agent/`` may import
this package (with :mod:`gateway.config` and :mod:`gateway.store`), never the runtime.
"""
