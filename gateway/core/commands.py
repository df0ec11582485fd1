"""The slash commands the gateway answers itself, by name: channels register them with the
platform (Telegram's command menu); :mod:`gateway.runtime.commands` answers them."""

from __future__ import annotations

COMMANDS = {
    "/start": "say hello",
    "/help": "list commands",
    "/new": "start a fresh conversation (history stays on disk)",
    "/status": "show what the gateway is doing",
    "/pair": "admins: list, approve CODE, deny CODE, revoke USER_ID",
}
