"""Decision guards around the tool loop: each a small piece with one job, in code.

parser   messy model output → trustworthy tool calls (three tiers)
dedupe   an identical call already made this turn is not run again
loops    repeated tools, ping-pong and cycles: a hint first, then a hard stop
review   termination review of a finished turn (NO_SEND, UNSENT_RESULTS, ...)
cleanup  failed attempts leave stored history once a retry succeeded
prompts  task-aware guidance blocks, included only when the turn needs them
trace    every guard decision, per turn, as JSONL
"""
