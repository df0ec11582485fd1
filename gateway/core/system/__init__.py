"""The machine the gateway runs on: files written whole, disk-full waits, the process lock,
Unix sockets, the TCP addresses it listens on, the network guard of sandboxes, logging with redaction, outgoing mail, and how
Switchboard was installed.
"""
