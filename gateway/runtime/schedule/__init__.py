"""Work that starts on its own: the scheduler, scheduled jobs, the heartbeat and
housekeeping.
"""
