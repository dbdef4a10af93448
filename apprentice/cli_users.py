"""`apprentice users add | list | revoke | rotate | learn`: the people who use this server.

    apprentice users add ada            # prints ada's token once; give it to her
    apprentice users add root --admin   # an admin: the admin API with their own token
    apprentice users list               # names, roles, states (never tokens)
    apprentice users rotate ada         # a new token; the old one stops working
    apprentice users revoke ada         # the token stops working; ada's rows stay hers
    apprentice users learn ada --off    # ada's feedback is never trained on (opt-out)

Each person's editor uses their own token (`APPRENTICE_TOKEN` in the editor's settings);
the shared token keeps working as the single-user default. Tokens are stored only as a
hash (feedback/queries/users.py), so a lost one is rotated, never read back. Bad input
(an unknown name, a name taken) is one `error:` line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from apprentice.prepare import prepare_database, settings_or_exit, startup_errors

users_app = typer.Typer(
    help="The people who use this server: each with their own token.", no_args_is_help=True
)
err = Console(stderr=True)
T = TypeVar("T")
Name = Annotated[str, typer.Argument(help="The user's name (letters, digits, . _ -).")]


def _in_db(fn: Callable[..., T]) -> T:
    """Run `fn(db)` in one transaction on the configured database (SQLite: migrated first;
    another database must be at head: `apprentice db upgrade`)."""
    from feedback.db import make_engine, make_sessionmaker, transaction
    from feedback.queries.users import UserError

    settings = settings_or_exit(err)
    with startup_errors(err):
        settings.ensure_home()
        prepare_database(settings)
    engine = make_engine(settings.database_url)
    try:
        with transaction(make_sessionmaker(engine)) as db:
            return fn(db)
    except UserError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()


def _show_token(name: str, token: str) -> None:
    err.print(f"token of [bold]{name}[/bold] (shown once; only its hash is stored):")
    print(token)  # stdout alone, so `TOKEN=$(apprentice users add ada)` works


@users_app.command("add")
def add(
    name: Name,
    admin: Annotated[bool, typer.Option("--admin", help="May use the admin API.")] = False,
) -> None:
    """Add a user and print their new token (once)."""
    from feedback.queries.users import add_user

    token = _in_db(lambda db: add_user(db, name, admin=admin)[1])
    _show_token(name, token)


@users_app.command("list")
def list_() -> None:
    """List users: name, role, whether their feedback is trained on, state."""
    from feedback.queries.users import list_users

    rows = _in_db(
        lambda db: [
            (u.name, "admin" if u.admin else "user", "yes" if u.learn else "opted out",
             f"revoked {u.revoked_at:%Y-%m-%d %H:%M}" if u.revoked_at else "active",
             f"{u.created_at:%Y-%m-%d %H:%M}")
            for u in list_users(db)
        ]
    )  # fmt: skip
    table = Table("name", "role", "learn", "state", "created (UTC)")
    for row in rows:
        table.add_row(*row)
    Console().print(table if rows else "no users yet: `apprentice users add NAME`")


@users_app.command("revoke")
def revoke(name: Name) -> None:
    """Revoke a user's token at once (their sessions and feedback stay theirs)."""
    from feedback.queries.users import revoke_user

    _in_db(lambda db: revoke_user(db, name))
    err.print(f"{name}'s token is revoked; `apprentice users rotate {name}` gives a new one")


@users_app.command("rotate")
def rotate(name: Name) -> None:
    """Give a user a new token (the old one stops working; a revoked user is restored)."""
    from feedback.queries.users import rotate_user

    _show_token(name, _in_db(lambda db: rotate_user(db, name)))


@users_app.command("learn")
def learn(
    name: Name,
    on: Annotated[
        bool, typer.Option("--on/--off", help="Train on this user's feedback, or never.")
    ] = True,
) -> None:
    """Opt a user's feedback in to (--on) or out of (--off) the learner's training data."""
    from feedback.queries.users import set_learning

    _in_db(lambda db: set_learning(db, name, learn=on))
    err.print(f"{name}'s feedback is {'trained on' if on else 'never trained on'}")
