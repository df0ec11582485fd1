"""What ``switchboard``'s exit status tells a supervisor beyond "failed" (1): the systemd
unit does not restart the gateway for the ones a person must fix first
(gateway/cli/service.py)."""

from __future__ import annotations

NOT_INSTALLED = 6  # a package the code imports is missing or too old: reinstall
