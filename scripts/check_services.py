"""Exit 0 when the PostgreSQL and Redis servers named on the command line answer, 1 otherwise.

Used by `make test` to decide whether the PostgreSQL/Redis phase can run (and, in CI, to fail
when it cannot).
"""

from __future__ import annotations

import sys


def main(database_url: str, redis_url: str) -> int:
    ok = True
    try:
        import dj_database_url
        import psycopg

        cfg = dj_database_url.parse(database_url)
        psycopg.connect(
            host=cfg["HOST"] or "127.0.0.1",
            port=cfg["PORT"] or 5432,
            user=cfg["USER"] or "postgres",
            password=cfg["PASSWORD"] or None,
            dbname="postgres",
            connect_timeout=3,
        ).close()
    except Exception as exc:  # any failure means "not reachable"
        print(f"PostgreSQL at {database_url} is not reachable: {exc}", file=sys.stderr)
        ok = False
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_connect_timeout=3).ping()
    except Exception as exc:
        print(f"Redis at {redis_url} is not reachable: {exc}", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
