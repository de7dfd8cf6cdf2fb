"""A coupon service: a coupon is issued once and may be redeemed once.

Written as a small team would write it: the standard library's
ThreadingHTTPServer (a thread per request), psycopg2 for PostgreSQL or
PyMySQL for MariaDB and MySQL, a small pool of connections, and the
drivers' defaults: each request's statements run in the transaction the
driver opens implicitly, committed when the request is done.

  POST /coupons?code=C                issue coupon C (one use)
  POST /<variant>/redeem?code=C       redeem it: 200, or 409 when it was already redeemed
  GET  /health                        200 once the database answers

Each <variant> is one way of redeeming, two of them wrong:

  naive         count C's redemptions; when there are none, insert one
  naive-rmw     read C's uses left; when there is one, write back one less and record the redemption
  unique        the naive code, on a table whose unique index refuses a second redemption (409)
  conditional   UPDATE the coupon WHERE it has a use left; the row count says who redeemed it
  for-update    lock the coupon's row (SELECT ... FOR UPDATE), then check and write
  serializable  the naive code in a SERIALIZABLE transaction, retried (after a pause)
                when the server aborts it

Configuration (environment):

  DATABASE_URL  postgres://user:pass@host:port/db or mysql://user:pass@host:port/db
  TABLE_PREFIX  the tables are <prefix>coupons (code, uses_left), <prefix>redemptions (code)
                and <prefix>redemptions_unique (code, unique); whoever runs the service makes them
  LISTEN        host:port (default 127.0.0.1:8080; port 0: any free port, printed)
"""

import os
import queue
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

SERIALIZABLE_TRIES = 10


class Postgres:
    """psycopg2: the unique index says 23505; SERIALIZABLE aborts one of two
    conflicting transactions with 40001 (40P01 when they deadlocked)."""

    def __init__(self, url):
        import psycopg2
        import psycopg2.errors

        self.driver = psycopg2
        self.url = url

    def connect(self):
        return self.driver.connect(self.url)

    def begin_serializable(self, cur):
        # psycopg2 has sent BEGIN already; this must be the transaction's
        # first statement.
        cur.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")

    def duplicate(self, err):
        return getattr(err, "pgcode", None) == "23505"

    def retryable(self, err):
        return getattr(err, "pgcode", None) in ("40001", "40P01")


class MySQL:
    """PyMySQL: the unique index says 1062. InnoDB's SERIALIZABLE is
    REPEATABLE READ whose plain SELECTs take shared locks: two requests that
    both read, then both insert, each wait on the other's lock, and the
    server breaks the deadlock by aborting one (1213, SQLSTATE 40001). That
    abort is what a retry must handle; a lock wait timeout (1205) too."""

    def __init__(self, url):
        import pymysql

        self.driver = pymysql
        u = urlsplit(url)
        self.args = dict(
            host=u.hostname or "127.0.0.1",
            port=u.port or 3306,
            user=unquote(u.username or "root"),
            password=unquote(u.password or ""),
            database=u.path.lstrip("/") or None,
        )

    def connect(self):
        return self.driver.connect(**self.args)

    def begin_serializable(self, cur):
        # Sets the level of the transaction that begins next: PyMySQL's
        # connection has none open once the last request committed.
        cur.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")

    def duplicate(self, err):
        return isinstance(err, self.driver.err.IntegrityError) and err.args[0] == 1062

    def retryable(self, err):
        return isinstance(err, self.driver.err.OperationalError) and err.args[0] in (1213, 1205)


class Pool:
    """At most size connections, each lent to one request at a time."""

    def __init__(self, db, size):
        self.db = db
        self.idle = queue.LifoQueue()
        self.slots = threading.BoundedSemaphore(size)

    def take(self):
        self.slots.acquire()
        try:
            return self.idle.get_nowait()
        except queue.Empty:
            pass
        try:
            return self.db.connect()
        except BaseException:
            self.slots.release()
            raise

    def give_back(self, conn, committed):
        try:
            if not committed:
                conn.rollback()
            self.idle.put(conn)
        except Exception:
            conn.close()  # broken: the next request connects afresh
        finally:
            self.slots.release()


class Lease:
    """A connection from the pool for one request: committed when the
    request succeeded, rolled back when it did not. A commit that fails (a
    serialization failure is often reported there) fails the request."""

    def __init__(self, pool):
        self.pool = pool

    def __enter__(self):
        self.conn = self.pool.take()
        return self.conn

    def __exit__(self, kind, err, tb):
        committed = False
        try:
            if kind is None:
                self.conn.commit()
                committed = True
        finally:
            self.pool.give_back(self.conn, committed)
        return False


class AlreadyRedeemed(Exception):
    pass


class Coupons:
    def __init__(self, db, prefix, pool_size=8):
        self.db = db
        self.pool = Pool(db, pool_size)
        self.coupons = prefix + "coupons"
        self.redemptions = prefix + "redemptions"
        self.unique = prefix + "redemptions_unique"

    def lease(self):
        return Lease(self.pool)

    def issue(self, code):
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO {self.coupons} (code, uses_left) VALUES (%s, 1)", (code,))

    def health(self):
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    # The two wrong ways.

    def naive(self, code, table=None):
        table = table or self.redemptions
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {table} WHERE code = %s", (code,))
            if cur.fetchone()[0] > 0:
                raise AlreadyRedeemed()
            cur.execute(f"INSERT INTO {table} (code) VALUES (%s)", (code,))

    def naive_rmw(self, code):
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT uses_left FROM {self.coupons} WHERE code = %s", (code,))
            row = cur.fetchone()
            if row is None or row[0] < 1:
                raise AlreadyRedeemed()
            cur.execute(f"UPDATE {self.coupons} SET uses_left = %s WHERE code = %s", (row[0] - 1, code))
            cur.execute(f"INSERT INTO {self.redemptions} (code) VALUES (%s)", (code,))

    # The fixes.

    def unique_index(self, code):
        try:
            self.naive(code, self.unique)
        except Exception as err:
            if self.db.duplicate(err):
                raise AlreadyRedeemed() from err
            raise

    def conditional(self, code):
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute(f"UPDATE {self.coupons} SET uses_left = uses_left - 1 WHERE code = %s AND uses_left > 0", (code,))
            if cur.rowcount != 1:
                raise AlreadyRedeemed()
            cur.execute(f"INSERT INTO {self.redemptions} (code) VALUES (%s)", (code,))

    def for_update(self, code):
        with self.lease() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT uses_left FROM {self.coupons} WHERE code = %s FOR UPDATE", (code,))
            row = cur.fetchone()
            if row is None or row[0] < 1:
                raise AlreadyRedeemed()
            cur.execute(f"UPDATE {self.coupons} SET uses_left = uses_left - 1 WHERE code = %s", (code,))
            cur.execute(f"INSERT INTO {self.redemptions} (code) VALUES (%s)", (code,))

    def serializable(self, code):
        for attempt in range(SERIALIZABLE_TRIES):
            try:
                with self.lease() as conn, conn.cursor() as cur:
                    self.db.begin_serializable(cur)
                    cur.execute(f"SELECT count(*) FROM {self.redemptions} WHERE code = %s", (code,))
                    if cur.fetchone()[0] > 0:
                        raise AlreadyRedeemed()
                    cur.execute(f"INSERT INTO {self.redemptions} (code) VALUES (%s)", (code,))
                return
            except Exception as err:
                if not self.db.retryable(err) or attempt == SERIALIZABLE_TRIES - 1:
                    raise
                # The transaction the server let through has yet to commit:
                # retried at once, this one would read before its write and
                # be aborted again. Wait longer each time, by a random amount
                # so two retries do not meet again.
                time.sleep(random.uniform(0.5, 1) * 0.02 * 2**attempt)


def handler(coupons):
    redeem = {
        "naive": coupons.naive,
        "naive-rmw": coupons.naive_rmw,
        "unique": coupons.unique_index,
        "conditional": coupons.conditional,
        "for-update": coupons.for_update,
        "serializable": coupons.serializable,
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body are two writes: without TCP_NODELAY the
        # body waits for the client's delayed ACK (40 ms on Linux).
        disable_nagle_algorithm = True

        def answer(self, status, text):
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if urlsplit(self.path).path != "/health":
                return self.answer(404, "not found")
            try:
                coupons.health()
            except Exception as err:
                return self.answer(503, f"database: {err}")
            self.answer(200, "ok")

        def do_POST(self):
            # Read the body, if any, so the connection stays usable.
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            url = urlsplit(self.path)
            code = parse_qs(url.query).get("code", [""])[0]
            if not code:
                return self.answer(400, "code= is required")
            parts = url.path.strip("/").split("/")
            try:
                if parts == ["coupons"]:
                    coupons.issue(code)
                    return self.answer(201, "issued")
                if len(parts) == 2 and parts[1] == "redeem" and parts[0] in redeem:
                    redeem[parts[0]](code)
                    return self.answer(200, "redeemed")
                return self.answer(404, "not found")
            except AlreadyRedeemed:
                self.answer(409, "already redeemed")
            except Exception as err:
                self.answer(500, f"{type(err).__name__}: {err}")

        def log_message(self, *args):
            pass

    return Handler


def main():
    url = os.environ.get("DATABASE_URL", "")
    scheme = urlsplit(url).scheme
    if scheme in ("postgres", "postgresql"):
        db = Postgres(url)
    elif scheme in ("mysql", "mariadb"):
        db = MySQL(url)
    else:
        sys.exit("DATABASE_URL must be a postgres:// or mysql:// URL")
    coupons = Coupons(db, os.environ.get("TABLE_PREFIX", ""))
    host, _, port = os.environ.get("LISTEN", "127.0.0.1:8080").rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), handler(coupons))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"listening on {host}:{port}", flush=True)  # port 0: the one the system chose
    server.serve_forever()


if __name__ == "__main__":
    main()
