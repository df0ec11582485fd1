"""``switchboard doctor``'s WhatsApp check: the token, the phone number id, and whether Meta
will deliver anything at all (the webhook subscription), without sending a message.

1. ``GET /<phone number id>``: the token works and may use that number.
2. ``GET /debug_token``: which app the token belongs to, and its WhatsApp Business Account.
3. ``GET /<app id>/subscriptions`` (with the app's own token, ``app id|app secret``): a
   ``whatsapp_business_account`` subscription, active, with the ``messages`` field, whose
   callback URL ends in ``whatsapp.webhook_path``. This also proves the app secret.
4. ``GET /<account id>/subscribed_apps``: the app is subscribed to the account's events.
   Without 3 and 4 a correct setup receives nothing, silently.
"""

from __future__ import annotations

from typing import Any

from channels.whatsapp.errors import channel_error
from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable
from channels.whatsapp.settings import WhatsAppSettings
from gateway.core.errors import ChannelPermanentError


async def probe(settings: WhatsAppSettings) -> str:
    assert settings.access_token and settings.app_secret and settings.phone_number_id
    token = settings.access_token.get_secret_value().strip()
    graph = GraphClient(settings.base_url, token, phone_number_id=settings.phone_number_id)
    try:
        number = await _call(
            graph,
            settings.phone_number_id,
            "SWITCHBOARD_WHATSAPP__ACCESS_TOKEN and SWITCHBOARD_WHATSAPP__PHONE_NUMBER_ID",
            params={"fields": "display_phone_number,verified_name"},
        )
        found = (
            f"number {number.get('display_phone_number', '?')} ({number.get('verified_name', '?')})"
        )
        debug = await _call(
            graph,
            "debug_token",
            "SWITCHBOARD_WHATSAPP__ACCESS_TOKEN",
            params={"input_token": token},
        )
        info = debug.get("data") or {}
        app_id = str(info.get("app_id") or "")
        if not app_id or info.get("is_valid") is False:
            raise ChannelPermanentError(
                "WhatsApp says the access token is not valid; check SWITCHBOARD_WHATSAPP__ACCESS_TOKEN"
            )
        secret = settings.app_secret.get_secret_value().strip()
        subscriptions = await _call(
            graph,
            f"{app_id}/subscriptions",
            "SWITCHBOARD_WHATSAPP__APP_SECRET (App settings > Basic > App secret)",
            token=f"{app_id}|{secret}",
        )
        found += "; " + _subscription(subscriptions, settings.webhook_path)
        for account in _accounts(info):
            apps = await _call(
                graph, f"{account}/subscribed_apps", "SWITCHBOARD_WHATSAPP__ACCESS_TOKEN"
            )
            ids = {
                str((a.get("whatsapp_business_api_data") or a).get("id"))
                for a in apps.get("data") or []
            }
            if app_id not in ids:
                raise ChannelPermanentError(
                    f"the app is not subscribed to WhatsApp Business Account {account}, so Meta "
                    f"sends it no messages: POST /{account}/subscribed_apps with the access token "
                    "(or subscribe it in the app's WhatsApp > Configuration)"
                )
        return found
    finally:
        await graph.close()


def _subscription(answer: dict[str, Any], path: str) -> str:
    for item in answer.get("data") or []:
        if item.get("object") != "whatsapp_business_account":
            continue
        fields = {f.get("name") if isinstance(f, dict) else f for f in item.get("fields") or []}
        url = str(item.get("callback_url") or "")
        if not item.get("active", True):
            raise ChannelPermanentError(f"the webhook subscription ({url}) is not active")
        if "messages" not in fields:
            raise ChannelPermanentError(
                f"the webhook ({url}) is not subscribed to the messages field: tick "
                "'messages' under WhatsApp > Configuration > Webhook fields"
            )
        if not url.rstrip("/").endswith(path.rstrip("/")):
            raise ChannelPermanentError(
                f"the webhook calls {url}, which does not end in whatsapp.webhook_path "
                f"({path}); Meta's messages would not reach Switchboard"
            )
        return f"webhook {url} subscribed to messages"
    raise ChannelPermanentError(
        "no webhook is set up for WhatsApp, so Meta delivers nothing: in the app's WhatsApp > "
        f"Configuration, set the callback URL to https://<your host>{path} with the verify "
        "token, and subscribe to 'messages'"
    )


def _accounts(info: dict[str, Any]) -> list[str]:
    """The WhatsApp Business Accounts the token may manage (from its granular scopes)."""
    accounts: list[str] = []
    for scope in info.get("granular_scopes") or []:
        if scope.get("scope") in ("whatsapp_business_messaging", "whatsapp_business_management"):
            accounts.extend(str(t) for t in scope.get("target_ids") or [] if str(t) not in accounts)
    return accounts


async def _call(
    graph: GraphClient,
    path: str,
    setting: str,
    *,
    params: dict[str, str] | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    try:
        return await graph.request("GET", path, params=params, token=token)
    except GraphError as exc:
        error = channel_error(exc)
        if isinstance(error, ChannelPermanentError):
            raise ChannelPermanentError(
                f"WhatsApp refused {path.rsplit('/', maxsplit=1)[-1]} ({exc}); check {setting}"
            ) from None
        raise error from None
    except GraphUnreachable as exc:
        raise channel_error(exc) from None
