"""The FastAPI app: routers, the WebSocket protocol, sessions."""
