"""The agent: context, the LLM tool-calling loop, tools and memory.

Never imports :mod:`channels`; it talks to the outside through :mod:`gateway` types.
"""
