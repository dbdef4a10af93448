"""Shared test setup. Fixtures live in tests/fixtures/, one module per real service.

Slow services (PostgreSQL database, vLLM server, the dev model) are session-scoped: started
once per test run, never once per test.
"""

pytest_plugins = [
    "tests.fixtures.settings",
    "tests.fixtures.models",
    "tests.fixtures.databases",
    "tests.fixtures.vllm",
    "tests.fixtures.s3",
]
