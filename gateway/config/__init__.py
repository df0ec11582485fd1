"""The whole configuration: one typed pydantic-settings tree (``settings``), its channel and
agent sections, and the generated reference (``doc``). Imports only :mod:`gateway.core`."""
