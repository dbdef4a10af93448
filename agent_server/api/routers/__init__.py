"""One router per resource: health (no token), sessions (REST), ws (the WebSocket)."""
