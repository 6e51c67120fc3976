"""Search by words, by meaning, and both: hits ranked by the indexes, read back from SQLite."""
