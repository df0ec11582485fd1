"""``switchboard service``: the gateway as a service of the machine's supervisor (systemd's
unit, launchd's agent) and what the running gateway keeps for launchd (launchd.py)."""
