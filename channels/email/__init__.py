"""The email channel: an IMAP inbox the bot answers by SMTP (see adapter.py).

Sending on its own (the ``send_email`` tool) needs only the SMTP settings; this channel is
on when the IMAP settings are set, and then needs SMTP too, to reply. ``plugin`` holds
``[email]`` and how the gateway builds the channel.
"""
