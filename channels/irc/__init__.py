"""IRC channel, over asyncio streams (docs/channels.md#irc).

Modules: ``plugin`` (``[irc]``, how the gateway builds the channel and how onboarding sets it
up), ``settings`` (and how nicks and masks match), ``adapter`` (lifecycle, inbound,
outbound), ``client`` (one connection kept up: PING/PONG, reconnects, paced sending with a
fence), ``registration`` (capabilities, SASL PLAIN, NICK/USER, NickServ), ``protocol`` (pure:
lines, case mapping, masks, the 512-byte limit), ``convert`` (pure PRIVMSG →
InboundMessage), ``render`` (an answer as lines), ``probe`` (``doctor``), ``greet``
(onboarding's test message). No package beyond the standard library.
"""
