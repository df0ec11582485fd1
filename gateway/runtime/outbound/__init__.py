"""An answer on its way out: the outbox worker of each channel, one delivery attempt,
what channels record about deliveries, and answers streamed by editing (drafts).
"""
