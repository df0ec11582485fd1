"""One turn of an agent, from its inputs to the outcome the user sees.

- :mod:`agent.request`: what the runtime asks for (:class:`TurnRequest`) and gets back
  (:class:`TurnOutcome`);
- :mod:`agent.turn.scope`: what the turn may touch, and whose words authorise its effects;
- :mod:`agent.turn.inputs`: what one run of the loop is given (:class:`TurnInputs`) and the
  agent's bounds (:class:`TurnLimits`);
- :mod:`agent.turn.loop`: the step loop (model call, parsed calls, guarded tools);
- :mod:`agent.turn.review`: whether an answer may end the turn;
- :mod:`agent.turn.outcome`: what the user sees (answer, notice, or nothing).

:class:`agent.agent.Agent` prepares the inputs and runs one turn through these; the guards
the loop applies live in :mod:`agent.guards`.
"""
