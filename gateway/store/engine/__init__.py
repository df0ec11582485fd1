"""The database under the repositories: one writer thread over SQLite or PostgreSQL (db),
the Connection seam and dialects (sql), the two engines, the schema and its migrations, the
integrity check and backup, and how long rows are kept (retention).
"""
