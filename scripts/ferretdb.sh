#!/usr/bin/env bash
# Start or stop a local FerretDB (MongoDB wire protocol over SQLite) for racetest's tests and CI.
#
#   scripts/ferretdb.sh start   build once (cached), start in the background, wait until it accepts
#                               connections, print the mongodb:// URI on stdout (and nothing else)
#   scripts/ferretdb.sh stop    stop the server started by `start` and remove its state
#
# In a CI script:
#
#   scripts/ferretdb.sh start
#   trap 'scripts/ferretdb.sh stop' EXIT
#
# or, to keep the URI:  RACETEST_MONGO_URI=$(scripts/ferretdb.sh start)
#
# Environment:
#   RACETEST_FERRETDB_ADDR  host:port to listen on (default 127.0.0.1:27017)
#   XDG_CACHE_HOME          the binary is cached in ${XDG_CACHE_HOME:-$HOME/.cache}/racetest/
#   TMPDIR                  the pid file, log and state live in ${TMPDIR:-/tmp}/racetest-ferretdb-<addr>/
#
# FerretDB 1.x is not MongoDB: conditional updates and findAndModify are not atomic under
# concurrency, partial/TTL indexes and transactions are refused (see shared/mongodb-in-ci.md).
# For real MongoDB semantics use docker-compose.yml at the repository root.
set -euo pipefail

FERRETDB_VERSION=v1.24.2
START_TIMEOUT_S=15

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC="$ROOT/tools/ferretdb"
ADDR=${RACETEST_FERRETDB_ADDR:-127.0.0.1:27017}
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/racetest"

HOST=${ADDR%:*}
PORT=${ADDR##*:}
HOST=${HOST#[}
HOST=${HOST%]}
RUN_DIR="${TMPDIR:-/tmp}"
RUN_DIR="${RUN_DIR%/}/racetest-ferretdb-${ADDR//[^A-Za-z0-9]/_}"
PID_FILE="$RUN_DIR/pid"
LOG_FILE="$RUN_DIR/log"
STATE_DIR="$RUN_DIR/state"

log() { echo "ferretdb.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	echo "usage: $0 start|stop" >&2
	exit 2
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$@"
	else
		shasum -a 256 "$@"
	fi
}

# port_open: true if something accepts TCP connections on HOST:PORT.
port_open() {
	if command -v timeout >/dev/null 2>&1; then
		timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$HOST" "$PORT" 2>/dev/null
	else
		bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$HOST" "$PORT" 2>/dev/null
	fi
}

# our_pid: prints the pid from PID_FILE if that process is still alive and is our ferretdb binary.
our_pid() {
	local pid cmd
	[[ -f "$PID_FILE" ]] || return 1
	pid=$(cat "$PID_FILE")
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	cmd=$(ps -p "$pid" -o command= 2>/dev/null || true)
	[[ "$cmd" == *ferretdb* ]] || return 1
	echo "$pid"
}

# binary: prints the path of the cached binary, building it first if it is missing.
# The file name carries a hash of the sources, so a change to them triggers a rebuild.
binary() {
	local hash bin tmp start
	hash=$(cd "$SRC" && cat go.mod go.sum main.go | sha256 | cut -c1-16)
	bin="$CACHE_DIR/ferretdb-$FERRETDB_VERSION-$hash"
	if [[ ! -x "$bin" ]]; then
		command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build FerretDB"
		mkdir -p "$CACHE_DIR"
		tmp="$bin.tmp.$$"
		# Measured from cold module and build caches: 383 s on 2 cores at load
		# 8-24 (2026-12-01); a warm build cache makes it seconds.
		log "building FerretDB $FERRETDB_VERSION from source into $bin, once: from cold Go caches this downloads its modules and compiles them, several minutes on a small machine (6 min on 2 busy cores); the binary is cached after that"
		start=$SECONDS
		if ! (cd "$SRC" && GOWORK=off go build -buildvcs=false -o "$tmp" .) >&2; then
			rm -f "$tmp"
			die "building FerretDB failed"
		fi
		mv -f "$tmp" "$bin" # atomic: concurrent starts never run a half-written binary
		log "built in $((SECONDS - start))s"
	fi
	echo "$bin"
}

start() {
	local pid bin deadline

	if pid=$(our_pid); then
		die "FerretDB is already running on $ADDR (pid $pid, started by this script); run '$0 stop' first"
	fi
	if port_open; then
		die "something is already listening on $ADDR (not started by this script); stop it or set RACETEST_FERRETDB_ADDR to a free host:port"
	fi

	bin=$(binary)

	rm -rf "$RUN_DIR"
	mkdir -p "$STATE_DIR"
	# stdout/stderr go to the log, so that `URI=$(scripts/ferretdb.sh start)` does not wait for
	# the server to exit.
	nohup "$bin" -listen "$ADDR" -dir "$STATE_DIR" >"$LOG_FILE" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$PID_FILE"

	deadline=$((SECONDS + START_TIMEOUT_S))
	until port_open; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "FerretDB exited during startup; its log ($LOG_FILE):"
			sed 's/^/  /' "$LOG_FILE" >&2 || true
			rm -f "$PID_FILE"
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			log "FerretDB did not accept connections on $ADDR within ${START_TIMEOUT_S}s; its log ($LOG_FILE):"
			sed 's/^/  /' "$LOG_FILE" >&2 || true
			stop
			exit 1
		fi
		sleep 0.1
	done

	log "FerretDB $FERRETDB_VERSION running on $ADDR (pid $pid, log $LOG_FILE)"
	echo "mongodb://$ADDR/"
}

stop() {
	local pid i
	if pid=$(our_pid); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do # up to 10 s for a clean shutdown
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "FerretDB (pid $pid) did not stop on SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		log "stopped FerretDB on $ADDR (pid $pid)"
	else
		log "no FerretDB started by this script is running on $ADDR"
	fi
	rm -rf "$RUN_DIR"
}

[[ $# -eq 1 ]] || usage
case "$1" in
start) start ;;
stop) stop ;;
*) usage ;;
esac
