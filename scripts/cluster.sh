#!/usr/bin/env bash
# Start, stop or inspect a real local cluster for racetest's clustered scenarios, built from the
# machine's own server packages (Debian's redis-server, PostgreSQL and MariaDB). Every cluster lives
# under its own directory, on ports of its own, and never touches the machine's shared servers.
#
#   scripts/cluster.sh start  TOPOLOGY   start it, wait until replication is up, print its
#                                        connection strings on stdout as NAME=value lines
#   scripts/cluster.sh stop   TOPOLOGY   stop every process it started and remove its directory
#   scripts/cluster.sh status TOPOLOGY   say which nodes answer (exit 1 if one does not)
#   scripts/cluster.sh env    TOPOLOGY   print the connection strings of a running cluster again
#
# TOPOLOGY is one of:
#   redis-replica     a Redis primary and one replica (no Sentinel: racetest's failover-lock
#                     promotes the replica itself, at the moment it chooses)
#   redis-cluster     a 6-node Redis Cluster (3 primaries, 3 replicas, redis-cli --cluster create)
#   postgres-replica  a PostgreSQL primary and an asynchronous streaming replica (pg_basebackup -R)
#                     that applies each commit 1 ms late (recovery_min_apply_delay)
#   mariadb-replica   a MariaDB primary and a replica (GTID replication)
#
# In a CI script:
#
#   eval "$(scripts/cluster.sh start postgres-replica)"
#   trap 'scripts/cluster.sh stop postgres-replica' EXIT
#
# Each cluster's directory holds a marker file, racetest-cluster, naming the topology, its nodes and
# their process ids. racetest injects a fault (kills, pauses or promotes a node) only in a cluster
# whose server reports a data directory under such a marker: a server this script did not start is
# never touched.
#
# Environment:
#   RACETEST_CLUSTER_DIR   where clusters live (default ${TMPDIR:-/tmp}/racetest-cluster)
#   RACETEST_CLUSTER_PORT  first port to use (default: 16390 redis-replica, 17000 redis-cluster,
#                          15440 postgres-replica, 13310 mariadb-replica; a cluster uses a few
#                          consecutive ports from there, and Redis Cluster's bus the same + 10000)
set -euo pipefail

BASE_DIR=${RACETEST_CLUSTER_DIR:-${TMPDIR:-/tmp}/racetest-cluster}
BASE_DIR=${BASE_DIR%/}
START_TIMEOUT_S=60

log() { echo "cluster.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	cat >&2 <<EOF
usage: $0 start|stop|status|env redis-replica|redis-cluster|postgres-replica|mariadb-replica
EOF
	exit 2
}

# port_free PORT: true when nothing listens on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# need_ports FIRST COUNT: refuse to start over a port someone else holds.
need_ports() {
	local first=$1 count=$2 p
	for ((p = first; p < first + count; p++)); do
		port_free "$p" || die "port $p is in use; stop what holds it, or choose other ports with RACETEST_CLUSTER_PORT"
	done
}

# wait_until DESCRIPTION COMMAND...: poll (bounded) until COMMAND succeeds.
wait_until() {
	local what=$1
	shift
	local i
	for ((i = 0; i < START_TIMEOUT_S * 4; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	die "$what did not happen within ${START_TIMEOUT_S}s (logs under $DIR)"
}

# marker writes the cluster's marker file: the proof, for racetest, that this script started it.
marker() {
	{
		echo "topology=$TOPOLOGY"
		echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "creator=racetest scripts/cluster.sh"
		cat "$DIR/nodes"
	} >"$DIR/racetest-cluster"
}

# node ROLE PORT PIDFILE DATADIR: record one node for the marker and for stop.
node() {
	echo "node=$1 127.0.0.1:$2 pidfile=$3 datadir=$4" >>"$DIR/nodes"
}

# ---------------------------------------------------------------- Redis

redis_start_node() { # NAME PORT [extra args...]
	local name=$1 port=$2
	shift 2
	mkdir -p "$DIR/$name"
	# No delay before a full resynchronisation: a replica restarted after a
	# failover catches up in milliseconds, not Redis's default 5 s.
	redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no --repl-diskless-sync-delay 0 \
		--dir "$DIR/$name" --logfile "$DIR/$name/log" --pidfile "$DIR/$name/pid" "$@" >/dev/null
	wait_until "redis on $port answering" redis-cli -p "$port" ping
}

start_redis_replica() {
	local p=${RACETEST_CLUSTER_PORT:-16390}
	need_ports "$p" 2
	redis_start_node primary "$p"
	node primary "$p" "$DIR/primary/pid" "$DIR/primary"
	redis_start_node replica $((p + 1)) --replicaof 127.0.0.1 "$p"
	node replica $((p + 1)) "$DIR/replica/pid" "$DIR/replica"
	wait_until "the replica's link to the primary" sh -c "redis-cli -p $((p + 1)) info replication | grep -q master_link_status:up"
	cat >"$DIR/env" <<EOF
RACETEST_REDIS_URL='redis://127.0.0.1:$p/0'
RACETEST_REDIS_READ_URL='redis://127.0.0.1:$((p + 1))/0'
EOF
}

start_redis_cluster() {
	local p=${RACETEST_CLUSTER_PORT:-17000} i addrs=() seeds=()
	need_ports "$p" 6
	need_ports $((p + 10000)) 6 # the cluster bus
	for ((i = 0; i < 6; i++)); do
		redis_start_node "node$i" $((p + i)) --cluster-enabled yes \
			--cluster-config-file "$DIR/node$i/nodes.conf" --cluster-node-timeout 2000
		node "node$i" $((p + i)) "$DIR/node$i/pid" "$DIR/node$i"
		addrs+=("127.0.0.1:$((p + i))")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: see $DIR/create.log"
	for ((i = 0; i < 6; i++)); do
		wait_until "cluster_state:ok on node $i" sh -c "redis-cli -p $((p + i)) cluster info | grep -q cluster_state:ok"
	done
	for ((i = 0; i < 3; i++)); do seeds+=("127.0.0.1:$((p + i))"); done
	local joined
	joined=$(
		IFS=,
		echo "${seeds[*]}"
	)
	cat >"$DIR/env" <<EOF
RACETEST_REDIS_URL='redis://$joined/0'
EOF
}

# ---------------------------------------------------------------- PostgreSQL

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
	[ -n "$d" ] || die "no PostgreSQL server binaries under /usr/lib/postgresql (Debian's postgresql package)"
	echo "$d"
}

# as_pg runs a PostgreSQL tool as the postgres user when we are root (the server refuses root).
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres_replica() {
	local p=${RACETEST_CLUSTER_PORT:-15440} bin
	bin=$(pg_bin)
	need_ports "$p" 2
	[ "$(id -u)" != 0 ] || chown postgres "$DIR"
	as_pg "$bin/initdb" -D "$DIR/primary" -A trust -U postgres --no-sync >"$DIR/initdb.log" 2>&1 ||
		die "initdb failed: see $DIR/initdb.log"
	cat >>"$DIR/primary/postgresql.conf" <<EOF
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
wal_level = replica
max_wal_senders = 5
hot_standby = on
fsync = off
# The replica is synchronous by name, yet commits wait for nobody unless a
# session asks (synchronous_commit = remote_apply, replica-read's fix): the
# cluster stays asynchronous by default, as most are.
synchronous_standby_names = '*'
synchronous_commit = local
EOF
	as_pg "$bin/pg_ctl" -D "$DIR/primary" -l "$DIR/primary.log" -w -t "$START_TIMEOUT_S" start >/dev/null ||
		die "the primary did not start: see $DIR/primary.log"
	node primary "$p" "$DIR/primary/postmaster.pid" "$DIR/primary"
	as_pg "$bin/createdb" -h 127.0.0.1 -p "$p" -U postgres test
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$p" -U postgres -D "$DIR/replica" -R -X stream -c fast >"$DIR/basebackup.log" 2>&1 ||
		die "pg_basebackup failed: see $DIR/basebackup.log"
	# The replica applies each commit 1 ms after the primary made it: the lag
	# of a loaded production replica. Without it a replica on the same idle
	# machine often caught up within the lock's hand-over, and replica-read's
	# naive form showed 0 races in 100 bursts in 2 runs of 4 (load 2-4); with
	# it, 91-99%. The report names the setting.
	cat >>"$DIR/replica/postgresql.conf" <<EOF
port = $((p + 1))
recovery_min_apply_delay = '1ms'
EOF
	as_pg "$bin/pg_ctl" -D "$DIR/replica" -l "$DIR/replica.log" -w -t "$START_TIMEOUT_S" start >/dev/null ||
		die "the replica did not start: see $DIR/replica.log"
	node replica $((p + 1)) "$DIR/replica/postmaster.pid" "$DIR/replica"
	wait_until "the replica streaming from the primary" sh -c \
		"psql -h 127.0.0.1 -p $p -U postgres -Atc \"SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'\" | grep -qx 1"
	cat >"$DIR/env" <<EOF
RACETEST_POSTGRES_URL='postgres://postgres@127.0.0.1:$p/test?sslmode=disable'
RACETEST_POSTGRES_READ_URL='postgres://postgres@127.0.0.1:$((p + 1))/test?sslmode=disable'
EOF
}

# ---------------------------------------------------------------- MariaDB

maria() { # PORT SQL: run SQL as root over the node's socket
	mariadb --no-defaults -S "$DIR/$(maria_name "$1").sock" -u root -e "$2"
}
maria_name() { if [ "$1" = "$MARIA_PRIMARY" ]; then echo primary; else echo replica; fi; }

maria_start_node() { # NAME PORT SERVER-ID
	local name=$1 port=$2 id=$3
	# A tmpdir of its own: mariadbd deletes every #sql… file in its tmpdir
	# when it starts, and with /tmp that is the other node's temporary
	# tables, and the machine's own server's.
	mkdir -p "$DIR/$name-tmp"
	mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$DIR/$name" --tmpdir="$DIR/$name-tmp" \
		--auth-root-authentication-method=normal --skip-test-db >"$DIR/$name-install.log" 2>&1 ||
		die "mariadb-install-db failed: see $DIR/$name-install.log"
	(mariadbd --no-defaults --user="$(id -un)" --datadir="$DIR/$name" --tmpdir="$DIR/$name-tmp" --port="$port" --bind-address=127.0.0.1 \
		--socket="$DIR/$name.sock" --pid-file="$DIR/$name/pid" --server-id="$id" --log-bin=binlog \
		--binlog-format=ROW --log-error="$DIR/$name.log" --skip-name-resolve \
		--innodb-buffer-pool-size=64M --innodb-log-file-size=16M </dev/null >/dev/null 2>&1 &)
	wait_until "mariadb on $port answering" mariadb-admin --no-defaults -S "$DIR/$name.sock" -u root ping
	node "$name" "$port" "$DIR/$name/pid" "$DIR/$name"
}

start_mariadb_replica() {
	local p=${RACETEST_CLUSTER_PORT:-13310}
	need_ports "$p" 2
	MARIA_PRIMARY=$p
	maria_start_node primary "$p" 1
	maria_start_node replica $((p + 1)) 2
	# Users made outside the binary log, on each node: replication then starts from identical
	# catalogs and carries only what clients write.
	local users="SET sql_log_bin = 0; CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl'; GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';"
	maria "$p" "$users"
	maria $((p + 1)) "$users"
	maria $((p + 1)) "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$p, MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos; START SLAVE;"
	maria "$p" "CREATE DATABASE test"
	wait_until "the replica replaying the primary" sh -c \
		"mariadb --no-defaults -S '$DIR/replica.sock' -u root -Nse \"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'test'\" | grep -qx 1"
	cat >"$DIR/env" <<EOF
RACETEST_MYSQL_DSN='root@tcp(127.0.0.1:$p)/test'
RACETEST_MYSQL_READ_DSN='root@tcp(127.0.0.1:$((p + 1)))/test'
EOF
}

# ---------------------------------------------------------------- stop and status

stop_all() {
	[ -d "$DIR" ] || return 0
	[ -f "$DIR/nodes" ] || [ -f "$DIR/racetest-cluster" ] || die "$DIR has no cluster.sh marker; not touching it"
	local line pidfile pid
	# Reverse order: replicas and sentinels before the primary they follow.
	while read -r line; do
		pidfile=${line#*pidfile=}
		pidfile=${pidfile%% *}
		[ -f "$pidfile" ] || continue
		pid=$(head -1 "$pidfile")
		[ -n "$pid" ] || continue
		kill -CONT "$pid" 2>/dev/null || true # a paused node cannot die
		kill -KILL "$pid" 2>/dev/null || true
	done < <(tac "$DIR/nodes" 2>/dev/null || true)
	rm -rf "$DIR"
}

status() {
	[ -f "$DIR/racetest-cluster" ] || {
		echo "$TOPOLOGY: not running"
		return 1
	}
	local line role addr port ok=0
	while read -r line; do
		role=${line#node=}
		role=${role%% *}
		addr=$(echo "$line" | awk '{print $2}')
		port=${addr##*:}
		if port_free "$port"; then
			echo "$TOPOLOGY $role $addr: not answering"
			ok=1
		else
			echo "$TOPOLOGY $role $addr: up"
		fi
	done < <(grep '^node=' "$DIR/racetest-cluster")
	return $ok
}

[ $# -eq 2 ] || usage
CMD=$1
TOPOLOGY=$2
case $TOPOLOGY in
redis-replica | redis-cluster | postgres-replica | mariadb-replica) ;;
*)
	log "unknown topology \"$TOPOLOGY\""
	usage
	;;
esac
DIR="$BASE_DIR/$TOPOLOGY"

case $CMD in
start)
	[ ! -e "$DIR" ] || die "$TOPOLOGY is already started under $DIR (stop it first: $0 stop $TOPOLOGY)"
	mkdir -p "$DIR"
	chmod 755 "$BASE_DIR" "$DIR"
	: >"$DIR/nodes"
	# A start that fails half-way, or is interrupted, removes what it started.
	started=0
	trap '[ "$started" = 1 ] || stop_all' EXIT
	trap 'exit 130' INT TERM
	case $TOPOLOGY in
	redis-replica) start_redis_replica ;;
	redis-cluster) start_redis_cluster ;;
	postgres-replica) start_postgres_replica ;;
	mariadb-replica) start_mariadb_replica ;;
	esac
	marker
	started=1
	log "$TOPOLOGY running under $DIR"
	cat "$DIR/env"
	;;
stop) stop_all ;;
status) status ;;
env)
	[ -f "$DIR/env" ] || die "$TOPOLOGY is not running"
	cat "$DIR/env"
	;;
*) usage ;;
esac
