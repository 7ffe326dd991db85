"""Create or drop the throw-away PostgreSQL database of .ci/fuzz.sh.

``fuzz_db.py create ADMIN_URL NAME`` prints the new database's URL;
``fuzz_db.py drop ADMIN_URL NAME`` removes it.
"""

from __future__ import annotations

import sys

import sqlalchemy as sa


def main(action: str, admin_url: str, name: str) -> None:
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if action == "create":
            conn.execute(sa.text('CREATE DATABASE "%s"' % name))
            url = sa.engine.make_url(admin_url).set(database=name)
            print(url.render_as_string(hide_password=False))
        else:
            conn.execute(sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"), {"n": name})
            conn.execute(sa.text('DROP DATABASE IF EXISTS "%s"' % name))
    admin.dispose()


if __name__ == "__main__":
    main(*sys.argv[1:4])
