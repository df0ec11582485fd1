"""The machine the gateway runs on: files written whole, disk-full waits, the process lock,
Unix sockets, the network guard of sandboxes, logging with redaction, outgoing mail, and how
Switchboard was installed.
"""
