"""The owner's control center: one module per section (approvals, conversations, health,
jobs, people, settings, usage), the names it shows instead of platform ids, and the routes
that serve them all behind the owner's session (:mod:`gateway.web.control.routes`)."""
