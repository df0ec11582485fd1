"""The agents and what they share: building them from settings, the model pool, MCP
servers, messages between agents, and background tasks.
"""
