"""Tools from Model Context Protocol servers (docs/tools.md).

``spec`` (what a server is), ``transports`` (starting or reaching it), ``client`` (one
connection's lifecycle), ``tools`` and ``results`` (its tools as ours), ``manager`` (all
servers, and each agent's view of them).
"""
