"""The feedback log: SQLAlchemy models, engine setup and small query functions. Imports nothing of ours."""
