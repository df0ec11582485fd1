"""A configuration changed while the gateway runs: the one path every change takes into it
(apply), the channels restarted alone (channels), the settings page's change (settings)."""
