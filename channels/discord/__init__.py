"""Discord channel (discord.py 2.x): DMs, guild channels and threads. See docs/channels.md.

Modules: ``plugin`` (``[discord]`` and how the gateway builds the channel; no SDK),
``adapter`` (lifecycle and wiring), ``connection`` (the gateway client and its bounded
reconnect policy), ``convert`` (pure Message → InboundMessage), ``media`` (inbound files),
``render`` (splitting, nonces, mention safety), ``sender`` (delivery, error mapping).

The SDK is imported only when Discord is enabled (through ``plugin.create``, which imports
``adapter``, which quiets discord.py's warning about the stdlib ``audioop`` first).
"""
