"""Words, under ingest and the indexes alike: a text's language, its analysis
into the index's terms and token counts, and where a text holds a query's words
(snippets)."""
