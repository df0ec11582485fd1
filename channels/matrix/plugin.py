"""The Matrix channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[matrix]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard --channel
matrix`` sets it up. Imported at every start, so it imports no SDK: matrix-nio (the optional
``[matrix]`` extra) loads in :func:`create`, when a homeserver is set."""

from __future__ import annotations

from channels.matrix.settings import MatrixSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext
from gateway.core.errors import ConfigError
from gateway.core.system.install import install_command


def create(section: MatrixSettings, context: ChannelContext) -> Channel:
    try:
        from channels.matrix.adapter import MatrixChannel  # noqa: PLC0415 - nio only when on
    except ImportError as exc:
        if "nio" not in str(exc):
            raise
        raise ConfigError(
            f"the Matrix channel needs matrix-nio: {install_command('matrix')} "
            "(or unset SWITCHBOARD_MATRIX__HOMESERVER)",
            field="matrix.homeserver",
        ) from exc
    return MatrixChannel(section, context)


async def greet(section: MatrixSettings, to: str, text: str) -> str:
    from channels.matrix.greet import greet  # noqa: PLC0415 - nio only when asked

    return await greet(section, to, text)


async def sign_in(section: MatrixSettings) -> dict[str, str]:
    from channels.matrix.sign_in import sign_in  # noqa: PLC0415 - nio only when asked

    return await sign_in(section)


PLUGIN = ChannelPlugin(
    name="matrix",
    title="Matrix",
    settings=MatrixSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question("homeserver", "Homeserver URL", default="https://matrix.org"),
            Question("user_id", "The bot's Matrix id (@name:server)"),
            Question(
                "access_token",
                "The bot's access token (empty: log in with its password)",
                secret=True,
            ),
            Question(
                "password",
                "The bot's password (used once to log in; the access token it gets is saved)",
                secret=True,
                instead_of="access_token",
                saved=False,
            ),
            Question("allow_from", "Your own Matrix id (@you:server)"),
        ),
        greet=greet,
        sign_in=sign_in,
    ),
)
