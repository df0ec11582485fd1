"""A message on its way in, before the dispatcher: who may talk (access, pairing),
group context, what they sent made readable (voice, documents), the agent and session
it joins (routing), and one process's intake to the dispatcher.
"""
