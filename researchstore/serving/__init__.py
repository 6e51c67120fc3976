"""Serving the tools over MCP: the SDK's server under uvicorn, its settings, keys and Host rule."""
