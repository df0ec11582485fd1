"""``switchboard chat``: the terminal chat, in-process or attached to a running gateway
(command, session, what it shows, the prompt that stays open while an answer streams).
"""
