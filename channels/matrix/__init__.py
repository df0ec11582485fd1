"""Matrix channel (matrix-nio), see docs/channels.md#matrix.

Modules: ``plugin`` (``[matrix]``, how the gateway builds the channel and how onboarding
sets it up; no SDK), ``adapter`` (lifecycle, invites, rooms), ``intake`` (``/sync`` with
the token stored only after journaling), ``encrypted`` (encrypted rooms: told why, then
left), ``convert`` (pure event → InboundMessage), ``media`` (inbound files), ``render``
(markdown → body and HTML, splitting), ``sender`` (parts with deterministic transaction ids,
drafts edited with ``m.replace``), ``state`` (the device id), ``probe`` (``doctor``),
``greet`` (onboarding's test message).

matrix-nio is an optional dependency (the ``[matrix]`` extra), imported only when the channel
is on.
"""
