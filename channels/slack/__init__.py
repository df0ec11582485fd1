"""Slack channel (slack-bolt async): Socket Mode or the HTTP Events API. See docs/channels.md.

Modules: ``plugin`` (``[slack]`` and how the gateway builds the channel; no SDK),
``adapter`` (lifecycle, intake that acknowledges only journaled events),
``convert`` (pure event → InboundMessage), ``media`` (inbound files), ``render`` (markdown →
mrkdwn, splitting), ``sender`` (delivery that never blindly repeats a call that may have
succeeded).
"""
