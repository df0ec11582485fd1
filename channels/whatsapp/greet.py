"""``switchboard onboard --channel whatsapp``'s test message: Meta's ``hello_world``
template (every business account has it, and only a template may open a conversation)."""

from __future__ import annotations

from channels.whatsapp.errors import channel_error
from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable
from channels.whatsapp.settings import WhatsAppSettings


async def greet(settings: WhatsAppSettings, to: str, text: str) -> str:
    """Send the template to the number ``to``; returns the message id. ``text`` is not
    sent: outside a conversation WhatsApp takes templates only."""
    assert settings.access_token and settings.phone_number_id
    graph = GraphClient(
        settings.base_url,
        settings.access_token.get_secret_value().strip(),
        phone_number_id=settings.phone_number_id,
    )
    template = {"name": "hello_world", "language": {"code": "en_US"}}
    try:
        return await graph.send({"to": to, "type": "template", "template": template})
    except (GraphError, GraphUnreachable) as exc:
        raise channel_error(exc) from exc
    finally:
        await graph.close()
