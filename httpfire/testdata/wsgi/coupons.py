"""A coupon service with the naive check-then-insert, as a team writes it.

PUT  /setup?key=K    makes coupon K
POST /attempt?key=K  redeems K: checks whether it was redeemed, and if not
                     (after a database's worth of waiting) records the
                     redemption: 200, else 409; an unknown K is 404
GET  /count?key=K    how many times K was redeemed: the effects
POST /claim?key=K    redeems K too, but as a winner that works harder than
                     the requests it refuses: a redeemed K is refused at
                     once (409), a fresh one is recorded after CLAIM_WORK
GET  /seen           every request the app was handed before it, one
                     "METHOD PATH" a line: what a probe really sent

State lives in the process's memory: run it with one worker process
(gunicorn -w 1), with the sync worker (one request at a time) or gthread
(--threads N, requests at once).
"""

import threading
import time
from urllib.parse import parse_qs

GAP = 0.010  # seconds between the check and the insert, as a database round trip
CLAIM_WORK = 0.050  # the winner's insert at /claim, five refusals' worth and more

_lock = threading.Lock()
_made = set()
_redeemed = {}
_seen = []


def app(environ, start_response):
    key = parse_qs(environ.get("QUERY_STRING", "")).get("key", [""])[0]
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    if path == "/seen":
        with _lock:
            return reply(start_response, "200 OK", "\n".join(_seen))
    with _lock:
        _seen.append(method + " " + path)
    if path == "/setup" and method in ("PUT", "POST"):
        with _lock:
            _made.add(key)
        return reply(start_response, "200 OK", "made")
    if path == "/count":
        with _lock:
            n = _redeemed.get(key, 0)
        return reply(start_response, "200 OK", str(n))
    if path == "/attempt" and method == "POST":
        with _lock:
            made, done = key in _made, _redeemed.get(key, 0)
        time.sleep(GAP)
        if not made:
            return reply(start_response, "404 Not Found", "no such coupon")
        if done:
            return reply(start_response, "409 Conflict", "already redeemed")
        with _lock:
            _redeemed[key] = _redeemed.get(key, 0) + 1
        return reply(start_response, "200 OK", "redeemed")
    if path == "/claim" and method == "POST":
        with _lock:
            made, done = key in _made, _redeemed.get(key, 0)
        if not made:
            return reply(start_response, "404 Not Found", "no such coupon")
        if done:
            return reply(start_response, "409 Conflict", "already redeemed")
        time.sleep(CLAIM_WORK)
        with _lock:
            _redeemed[key] = _redeemed.get(key, 0) + 1
        return reply(start_response, "200 OK", "redeemed")
    return reply(start_response, "404 Not Found", "no such path")


def reply(start_response, status, body):
    data = (body + "\n").encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]
