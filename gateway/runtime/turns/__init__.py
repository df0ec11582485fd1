"""The dispatcher's turn handler: one small handler per kind of turn, one commit.

:class:`~gateway.runtime.turns.handlers.TurnHandlers` is what the dispatcher calls with each
batch; it passes the batch to the handler for its kind:

- :mod:`~gateway.runtime.turns.chat`: a person's messages (or another agent's, routed by
  :mod:`~gateway.runtime.turns.routes`): commands, the allowance, the agent's turn while the
  chat shows it working, parking for an approval;
- :mod:`~gateway.runtime.turns.scheduled`: a heartbeat check-in or a scheduled job;
- :mod:`~gateway.runtime.turns.task_results`: a background task's result, delivered without a
  model call.

Each ends in :mod:`~gateway.runtime.turns.commit`: history final, replies queued, inbound
done, in one transaction.
"""
