"""Reading the web for the agent: an SSRF guard, a capped fetcher, extraction and condensing.

Only :mod:`agent.tools.web` uses this package. Heavy libraries (trafilatura, ddgs) are
imported inside the functions that need them, so start-up does not pay for them.
"""
