"""Tools the model can call. :func:`agent.tools.registry.default_tools` lists the built-ins."""
