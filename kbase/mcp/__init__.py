"""The Model Context Protocol face."""
