"""The slash commands the gateway answers itself, by name: channels register them with the
platform (Telegram's command menu); :mod:`gateway.runtime.dispatch.commands` answers them."""

from __future__ import annotations

COMMANDS = {
    "/start": "say hello",
    "/help": "list commands",
    "/stop": "stop what I am doing now (and drop the messages waiting behind it)",
    "/new": "start a fresh conversation (history stays on disk); stops what runs first",
    "/status": "show what I am doing, how full the conversation is, what it cost today",
    "/usage": "your tokens and cost today and this month, what your limits leave (/usage footer on|off)",
    "/compact": "summarise this conversation now, to free room in it",
    "/context": "what my next prompt here is made of, in tokens, and what is cached",
    "/model": "owner and admins: list the models, switch this chat's (/model NAME, /model default)",
    "/pair": "admins: list, approve CODE, deny CODE, revoke USER_ID",
    "/approve": "owner and admins: let a waiting action run (/approve ID)",
    "/deny": "owner and admins: refuse a waiting action (/deny ID)",
    "/show": "owner and admins: a waiting action in full (/show ID)",
    "/skills": "the skills and what each may do; owner: approve, edit or drop a proposal",
    "/link": "be one person on every channel: a code to send from your other chat (/link CODE)",
    "/unlink": "make this chat yours alone again (/unlink CHANNEL:ID: that address)",
}

# Answered at once, beside the chat's queue, even while a turn runs (gateway.runtime.dispatch.controls).
CONTROL_COMMANDS = frozenset({"/stop", "/status", "/new", "/help"})

# They change whose the chat is: a turn of theirs leaves the conversation's recorded owner
# (its recall scope) to the turns after it, whose principal knows the change.
PERSON_COMMANDS = frozenset({"/link", "/unlink"})

# Answered without a model call, so a person over their allowance gets them too (what it
# says of their spend, how to stop what runs).
UNMETERED_COMMANDS = CONTROL_COMMANDS | {"/usage"}

# Decisions on approval requests: they are answered even while the chat they are sent in
# waits for an approval itself (see gateway.runtime.dispatch.dispatcher), or the owner's own waiting
# turn could never be approved from the owner's chat.
APPROVAL_COMMANDS = ("/approve", "/deny", "/show")
