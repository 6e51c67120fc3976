"""The floor: the SQLite file (its connection, schema, rows and read queries),
and derived indexes kept in step with it (the pending record, packing, the
cache). Imports nothing above it; ``store.py`` puts the file and its indexes
together."""
