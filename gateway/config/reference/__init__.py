"""The settings described for people: the generated reference (docs/configuration.md) and
the same keys as the control center's settings form."""
