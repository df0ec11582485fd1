"""What the nodes of a cluster share in PostgreSQL: membership and the leader lock, the node
rows, notifications between nodes (listener) and the claims that fence a session's writes.
"""
