"""Embedding: the models, the choice of one, and the stage that embeds chunks (here or on Ray)."""
