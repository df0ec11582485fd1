"""``switchboard doctor``'s Signal check: signal-cli's daemon answers, and serves the account.

``GET /api/v1/check`` (the daemon runs), then ``listGroups`` for the account (a daemon
that does not have it refuses: "Specified account does not exist"). Nothing is sent and
no events are read. No answer is "cannot reach"; a refusal names the setting to fix.
"""

from __future__ import annotations

from channels.signal.rpc import RpcError, SignalRpc, Unreachable
from channels.signal.settings import SignalSettings
from gateway.core.errors import ChannelPermanentError, ChannelTransientError

TIMEOUT = 10.0


async def probe(settings: SignalSettings) -> str:
    assert settings.rpc_url and settings.account
    rpc = SignalRpc(settings.rpc_url, settings.account, timeout=TIMEOUT)
    try:
        await rpc.check()
        groups = await rpc.call("listGroups")
    except Unreachable as exc:
        raise ChannelTransientError(
            f"{exc}; start it with `signal-cli -a {settings.account} daemon --http` "
            "(SWITCHBOARD_SIGNAL__RPC_URL)"
        ) from None
    except RpcError as exc:
        raise ChannelPermanentError(
            f"signal-cli at {settings.rpc_url} refused the account {settings.account} "
            f"({exc.message}); check SWITCHBOARD_SIGNAL__ACCOUNT, and that signal-cli has it "
            "registered or linked"
        ) from None
    finally:
        await rpc.close()
    count = len(groups) if isinstance(groups, list) else 0
    return f"{settings.account} through {settings.rpc_url} ({count} group(s))"
