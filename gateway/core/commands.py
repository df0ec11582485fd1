"""The slash commands the gateway answers itself, by name: channels register them with the
platform (Telegram's command menu); :mod:`gateway.runtime.commands` answers them."""

from __future__ import annotations

COMMANDS = {
    "/start": "say hello",
    "/help": "list commands",
    "/new": "start a fresh conversation (history stays on disk)",
    "/status": "show what the gateway is doing",
    "/pair": "admins: list, approve CODE, deny CODE, revoke USER_ID",
    "/approve": "owner and admins: let a waiting action run (/approve ID)",
    "/deny": "owner and admins: refuse a waiting action (/deny ID)",
}

# Decisions on approval requests: they are answered even while the chat they are sent in
# waits for an approval itself (see gateway.runtime.dispatcher), or the owner's own waiting
# turn could never be approved from the owner's chat.
APPROVAL_COMMANDS = ("/approve", "/deny")
