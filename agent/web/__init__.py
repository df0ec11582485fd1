"""Reading the web for the agent: an SSRF guard, a capped fetcher, a guarded headless
browser (proxy, per-fetch contexts, limits), extraction and condensing.

:mod:`agent.tools.web` uses this package; the runtime only owns the browser's lifecycle.
Heavy libraries (trafilatura, ddgs, Playwright) are imported inside the functions that
need them, so start-up does not pay for them.
"""
