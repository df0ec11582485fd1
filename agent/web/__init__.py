"""Reading the web for the agent, and acting on it: an SSRF guard, a capped fetcher, a
guarded headless browser (proxy, per-fetch contexts, limits), extraction and condensing;
and the ``browser`` tool's sessions (session, sessions, profiles, what commits something).

:mod:`agent.tools.web` and :mod:`agent.tools.browser` use this package; the runtime only
owns the browsers' lifecycle. Heavy libraries (trafilatura, ddgs, Playwright) are imported inside the functions that
need them, so start-up does not pay for them.
"""
