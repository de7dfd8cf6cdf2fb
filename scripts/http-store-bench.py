#!/usr/bin/env python3
"""Every HTTP release mode against a naive fan-out, on an endpoint whose check
and write are real Redis GET/SET and PostgreSQL SELECT/INSERT round trips, or a
100µs parked window
(httpfire/httpfiretest/storeserver, in a process of its own, HTTP/1.1 + h2c).
The modes take turns in chunks of bursts within one run, so a noisy machine
weighs on all alike; the load average is printed beside the table.

    go build -o /tmp/racetest . && go build -o /tmp/storeserver ./httpfire/httpfiretest/storeserver
    scripts/http-store-bench.py /tmp/racetest /tmp/storeserver [rounds] [chunk] [stores]

stores: a comma-separated list of redis, postgres and parked (default all
three); parked is the 100µs parked-I/O window of the repo's in-process HTTP
target, served from its own process.
"""
import json, os, re, subprocess, sys

racetest, storeserver = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
chunk = int(sys.argv[4]) if len(sys.argv) > 4 else 20
modes = ["naive", "barrier", "last-byte", "single-packet", "auto"]

def load():
    return open("/proc/loadavg").read().split()[0]

print(f"load before {load()}")
rows = []
for store in (sys.argv[5].split(",") if len(sys.argv) > 5 else ["redis", "postgres", "parked"]):
    srv = subprocess.Popen([storeserver, "-store", store], stdout=subprocess.PIPE, text=True)
    addr = srv.stdout.readline().split()[-1]
    try:
        for n in [2, 20]:
            tally = {m: [0, 0, []] for m in modes}
            chosen = ""
            for r in range(rounds):
                for i in range(len(modes)):
                    m = modes[(i + r) % len(modes)]
                    out = subprocess.run([racetest, "http", "POST", f"http://{addr}/attempt?key={{{{.Token}}}}",
                                          "-n", str(n), "--bursts", str(chunk), "--release", m, "--expect", "race",
                                          "--effects", f"http:http://{addr}/count?key={{{{.Token}}}}", "-o", "json"],
                                         capture_output=True, text=True)
                    run = json.loads(out.stdout)["runs"][0]
                    if m == "auto":
                        chosen = run["release"]
                    tally[m][0] += run["violations"]
                    tally[m][1] += run["bursts"]
                    for note in run.get("notes", []):
                        g = re.search(r"server arrival spread .*median ([0-9.]+)(µs|ms)", note)
                        if g:
                            v = float(g.group(1)) * (1000 if g.group(2) == "ms" else 1)
                            tally[m][2].append(v)
            for m in modes:
                k, b, arr = tally[m]
                arr.sort()
                med = arr[len(arr) // 2] if arr else float("nan")
                name = m if m != "auto" else f"auto ({chosen})"
                rows.append((store, n, name, k, b, med))
    finally:
        srv.terminate()
        srv.wait()
print(f"load after {load()}")
print("STORE     N   MODE                  EXPOSED          ARRIVAL µs (median of chunk medians)")
for store, n, m, k, b, med in rows:
    print(f"{store:9} {n:<3} {m:21} {k:4}/{b:<4} {100*k/max(b,1):5.1f}%   {med:8.1f}")
