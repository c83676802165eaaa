"""Rendering results: terminal tables, JSON, Markdown and PNG figures."""
