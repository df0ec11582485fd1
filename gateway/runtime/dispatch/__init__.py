"""The dispatcher and what is answered beside its queues: per-chat order, chats in
parallel, controls (/stop, /new, /status) and the gateway's own commands.
"""
