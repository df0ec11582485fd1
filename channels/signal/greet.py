"""``switchboard onboard --channel signal``'s test message: one line to the person named."""

from __future__ import annotations

from channels.signal.rpc import RpcError, SignalRpc, Unreachable
from channels.signal.sender import target
from channels.signal.settings import SignalSettings, is_person
from gateway.core.errors import ChannelPermanentError, ChannelTransientError


async def greet(settings: SignalSettings, to: str, text: str) -> str:
    """Send ``text`` to ``to`` (a number or UUID); returns the message's timestamp."""
    assert settings.rpc_url and settings.account
    if not is_person(to):
        raise ChannelPermanentError(f"{to!r} is not a number in international form (+49...)")
    rpc = SignalRpc(settings.rpc_url, settings.account, timeout=30)
    try:
        result = await rpc.call("send", {**target(to), "message": text})
    except RpcError as exc:
        raise exc.channel_error() from None
    except Unreachable as exc:
        raise ChannelTransientError(str(exc)) from None
    finally:
        await rpc.close()
    stamp = result.get("timestamp") if isinstance(result, dict) else None
    return f"message {stamp}"
