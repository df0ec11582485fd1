"""The floor: the smallest bot the libraries allow (python-telegram-bot long polling -> one
openai chat completion -> reply). No journal, no tools, no context: what the libraries
themselves cost on this machine. ``python -m bench.compare`` runs it beside Switchboard;
alone: ``FLOOR_TOKEN=... FLOOR_BASE_URL=http://.../bot FLOOR_LLM_URL=http://.../v1
python -m bench.floor``.
"""

import os

import openai
from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters

client = openai.AsyncOpenAI(base_url=os.environ["FLOOR_LLM_URL"], api_key="sk-floor")


async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.message is not None and update.message.text is not None
    reply = await client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": update.message.text}]
    )
    await update.message.reply_text(reply.choices[0].message.content or "")


def main() -> None:
    builder = Application.builder().token(os.environ["FLOOR_TOKEN"])
    app = builder.base_url(os.environ["FLOOR_BASE_URL"]).concurrent_updates(True).build()
    app.add_handler(MessageHandler(filters.TEXT, answer))
    app.run_polling(poll_interval=0, timeout=30)


if __name__ == "__main__":
    main()
