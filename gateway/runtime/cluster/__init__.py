"""A node of a cluster (PostgreSQL): who leads, and which node runs which session."""
