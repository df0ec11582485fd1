"""Who may use the web server: the guard on every route (:mod:`~gateway.web.access.security`),
signed-in sessions, one-time sign-in links, the login pages and the slowing of guesses."""
