"""``switchboard onboard``: a home made from the templates, the model asked for and checked,
a channel set up; the files it writes (config.toml, .env) and the next commands it names.
"""
