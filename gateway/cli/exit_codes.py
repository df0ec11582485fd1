"""What ``switchboard``'s exit status tells a supervisor beyond "failed" (1): the systemd
unit does not restart the gateway for the ones a person must fix first
(:data:`A_PERSON_MUST_ACT`, gateway/cli/service/command.py); restarting on them every few seconds
would only repeat the error. docs/reliability.md#exit-codes lists them all, with what to do.

Only standard-library imports here: the command's entry point (gateway/cli/entry.py) reads
it before anything that may be missing is imported."""

from __future__ import annotations

OK = 0
FAILED = 1  # anything else: an error no restart is known not to fix, or a crash
CONFIG = 2  # the configuration is invalid (a key, a value, a file that cannot be read)
ANOTHER_INSTANCE = 3  # another Switchboard process uses this home's data directory
FENCED = 4  # a cluster node found another node leading (started again, it is a standby)
STORE_REFUSED = 5  # the store cannot be used as it is: damaged, foreign, or a schema to act on
NOT_INSTALLED = 6  # a package the code imports is missing or too old: reinstall
PORT_IN_USE = 7  # another program listens on a port a setting names
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
BROKEN_PIPE = 141  # the reader of the output went away (128 + SIGPIPE)

A_PERSON_MUST_ACT = (CONFIG, STORE_REFUSED, NOT_INSTALLED, PORT_IN_USE)
