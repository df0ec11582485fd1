"""WhatsApp channel (Meta's Cloud API), see docs/channels.md#whatsapp.

Modules: ``plugin`` (``[whatsapp]``, how the gateway builds the channel and how onboarding
sets it up), ``adapter`` (lifecycle and wiring), ``webhook`` (Meta's handshake and signed
POSTs on the gateway's web server), ``convert`` (pure webhook body → messages, reports,
reactions), ``media`` (inbound files), ``render`` (markdown → WhatsApp formatting,
splitting), ``sender`` (the 24-hour window, templates, parts), ``errors`` (Meta's codes as
the outbox's error types), ``graph`` (a thin Graph API client), ``probe`` (``doctor``),
``greet`` (onboarding's test message).
"""
