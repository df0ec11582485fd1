"""What ``switchboard``'s exit status tells a supervisor beyond "failed" (1): the systemd
unit does not restart the gateway for the ones a person must fix first
(:data:`A_PERSON_MUST_ACT`, gateway/cli/service.py); restarting on them every few seconds
would only repeat the error."""

from __future__ import annotations

CONFIG = 2  # the configuration is invalid (a key, a value, a file that cannot be read)
STORE_REFUSED = 5  # the store cannot be used as it is: damaged, foreign, or a schema to act on
NOT_INSTALLED = 6  # a package the code imports is missing or too old: reinstall

A_PERSON_MUST_ACT = (CONFIG, STORE_REFUSED, NOT_INSTALLED)
