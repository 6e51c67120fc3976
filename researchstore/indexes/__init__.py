"""The derived indexes: Tantivy's word index and the vector index, rebuilt from SQLite."""
