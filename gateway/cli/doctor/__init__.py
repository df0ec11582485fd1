"""``switchboard doctor``: every check of a home, each with what to do (config, models,
store, files, tools, memory, channels' logins, webhooks and the API).
"""
