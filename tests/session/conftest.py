"""tests/session borrows the API's fixtures: `api_settings` (a fresh PostgreSQL database at
head, a known token) and `serve` (a real agent server)."""

from tests.api.conftest import api_settings, serve

__all__ = ["api_settings", "serve"]
