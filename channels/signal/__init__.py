"""Signal channel, through a signal-cli daemon's JSON-RPC interface (docs/channels.md#signal).

Modules: ``plugin`` (``[signal]``, how the gateway builds the channel and how onboarding sets
it up), ``settings``, ``adapter`` (lifecycle, inbound, outbound), ``rpc`` (JSON-RPC over
HTTP and the event stream), ``intake`` (the event stream, its position moved only past
journaled messages), ``convert`` (pure notification → InboundMessage or receipt), ``media``
(inbound files), ``render`` (markdown → text with Signal's styles, split), ``sender``
(parts, quotes, files, typing, reactions), ``recovery`` (a lost send settled by delivery
receipts), ``probe`` (``doctor``), ``greet`` (onboarding's test message).

It needs no package beyond Switchboard's own (aiohttp); signal-cli itself is the user's.
"""
