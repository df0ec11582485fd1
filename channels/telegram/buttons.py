"""Messages with buttons (approval requests) and what happens when one is pressed.

A message with ``actions`` goes out (channels/telegram/sender.py) with the inline keyboard
:func:`keyboard` under its last part, whose callback data is each action's command
(``/approve K7QW2M9P``, well under Telegram's 64 bytes). A press arrives as a
``callback_query`` update, which :mod:`.convert` turns into that command from the presser;
once it is journaled, :func:`acknowledge` stops the button's spinner and, in a private chat
(where only its one user can press), takes the keyboard off so it is not pressed twice. The
decision itself is the gateway's: it answers in the chat.
"""

from __future__ import annotations

import logging

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatType
from telegram.error import TelegramError

from gateway.core.messages import OutboundMessage

log = logging.getLogger(__name__)

MAX_CALLBACK_BYTES = 64


def keyboard(message: OutboundMessage) -> InlineKeyboardMarkup:
    buttons = []
    for action in message.actions:
        data = action.command.encode()[:MAX_CALLBACK_BYTES].decode(errors="ignore")
        buttons.append(InlineKeyboardButton(action.label, callback_data=data))
    return InlineKeyboardMarkup([buttons])


async def acknowledge(bot: Bot, query: CallbackQuery) -> None:
    """After the press was journaled: answer it (Telegram shows a spinner until then) and,
    in a private chat, remove the buttons. Cosmetic: failures are only logged."""
    try:
        await bot.answer_callback_query(query.id, text="Received")
        message = query.message
        if (
            message is not None
            and message.chat.type == ChatType.PRIVATE
            and message.chat.id == query.from_user.id
        ):
            await bot.edit_message_reply_markup(
                chat_id=message.chat.id, message_id=message.message_id, reply_markup=None
            )
    except TelegramError as exc:
        log.info("telegram: could not acknowledge button press %s: %s", query.id, exc)
