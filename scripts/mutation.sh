#!/usr/bin/env bash
# Mutation testing of racetest's verdict path (issue 17): a verdict is only as
# trustworthy as the tests that would notice it going wrong. gremlins makes
# one small change at a time (> into >=, + into -, a condition negated) in
# the code that decides verdicts, exit codes and outcome classes, and runs
# the package's tests; a change no test notices ("lived") is a bug the tests
# would let through.
#
#   scripts/mutation.sh                 what a change touched (CI; see below)
#   scripts/mutation.sh --all           every package of the verdict path, whole
#   scripts/mutation.sh runner suite    the packages named, whole (names as in TARGETS)
#   scripts/mutation.sh --table         the whole runs on record (scripts/mutation-whole.txt),
#                                       and whether HEAD's code is still the code they judged
#   scripts/mutation.sh --judge [NAME...]  run what the table says is not judged at HEAD:
#                                       a file never run whole, whole; a changed one, on the
#                                       lines changed since its last whole run; prints the
#                                       ledger rows (MUTATION_RECORD=1 appends them)
#   scripts/mutation.sh --scope         every file of a target package is mutated or named
#                                       in scripts/mutation-scope.txt with its reason
#
# What CI runs (no arguments): every package of TARGETS with a .go file
# (tests included) that differs from the base. Each is judged whole while
# its measured cost (scripts/mutation-costs.txt, the cheapest first) fits
# what is left of MUTATION_BUDGET seconds (default 1800; .ci/run gives
# 1200); the rest on the lines that differ in their mutated files
# (gremlins --diff), or, when only their tests or unmutated files changed,
# not at all, and the script names them with the command that runs them
# whole. The plan and the seconds it commits are printed first. Every
# package whole takes 60-90 minutes on this machine's 2 shared cores, and
# one package up to 25 (cmd and suite: 970-1,520 s each at load 10-25; the
# figures are in issue 17's closing notes and docs/measurements.md): more
# than CI has. The changed-lines runs are not cut to fit: a landing whose
# changed lines hold many mutants is still judged on all of them, and the
# step takes longer (a mutant costs about 35 s in cmd, 10 s in suite and
# runplan, 3-6 s in runner and report).
#
# gremlins cannot change a constant, a call's argument or a returned
# value: scripts/handmutants.sh makes those one-line changes by hand
# (scripts/hand-mutants.txt: each error classification, rows of the
# expectation table, the default constants) and runs the test that must
# notice each; CI runs it after this script.
#
# The base: MUTATION_BASE if set; else, on a branch, its merge base with
# main (everything the branch would land); else (CI runs a clean clone of
# main) the commit named in .ci/landed, where the previous landing ended,
# so that a landing of many commits is judged whole, not on its last
# commit. A session sets .ci/landed to main's HEAD when it starts (the file
# says how), and lands the change with its work. A file not updated only
# widens the judgement to the landings since the commit it names. When the
# file is missing, or names a commit that is not an ancestor of HEAD (a
# shallow clone, history rewritten), the base is HEAD^1, the first parent,
# and the script says so: for a merge commit that is main before the
# branch landed; for a commit made on main directly, that commit alone.
# gremlins' --diff reads
# the lines added in each hunk of 'git diff --merge-base BASE', so a hunk
# with several separate additions is taken as its first added lines' span
# (v0.6.0): a mutant next to a change can be tested, or one in it missed.
#
# The gate, per package: test efficacy (killed / (killed + lived)) and
# mutator coverage ((killed + lived) / all mutants) both at least the
# package's floor in TARGETS (the goal is 90% and 90%). Mutants listed in
# scripts/mutation-equivalents.txt are equivalent (no behaviour can tell
# them from the original) or out of gremlins' reach; each has its reason
# there, and each is counted apart and printed, never dropped silently. An
# entry that no longer matches any mutant is reported so the list stays true.
# Mutants of a switch's case expressions are never run by gremlins v0.6.0
# (its coverage is by statement block, and a case expression is in none):
# they are printed as SWITCH CASE and counted apart, and the summary gives
# the coverage with them too. Rewriting such a switch as ifs brings them
# under test (runner's Config.Validate was).
#
# Environment:
#   MUTATION_BASE   the commit to compare with (default: see "The base" above)
#   MUTATION_OUT    where the raw gremlins output goes (default /tmp/racetest-mutation)
#   MUTATION_BUDGET seconds of whole-package runs CI may plan (default 1800)
#   MUTATION_BY_HAND  targets (space-separated names) that the changed mode
#                   (CI) leaves out, to be run by name by hand: .ci/run sets
#                   it, and says why
#   MUTATION_RUN    a go test -run pattern: only those tests run against each mutant
#                   (a lower bound of the efficacy, in the time of those tests)
#   MUTATION_SKIP_TESTS  a go test -skip pattern, the same lower bound as MUTATION_RUN
#   MUTATION_SERVERS  1: the servers a target points at a closed port are used after all
#   MUTATION_TRUST_LEDGER  1 (CI): in the changed mode, leave out a target whose touched
#                   files the ledger judges at HEAD's code, or owes
#   MUTATION_FILES  --judge: only these files (base names, space-separated)
#   MUTATION_RECORD 1: --judge appends its rows to scripts/mutation-whole.txt when
#                   every run met its floors
#   MUTATION_DRY    1: list the mutants and check that each entry of the
#                   equivalents list names one of them; run none, judge no floor
#   GREMLINS        the gremlins binary (default: $(go env GOPATH)/bin/gremlins)
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS_VERSION=v0.6.0
OUT=${MUTATION_OUT:-/tmp/racetest-mutation}
EQUIVALENTS=scripts/mutation-equivalents.txt
COSTS=scripts/mutation-costs.txt
WHOLE=scripts/mutation-whole.txt
declare -A whole=()
LANDED=.ci/landed

# TARGETS: name | package dir | files mutated (the verdict path in it) |
# efficacy floor | coverage floor | environment for its tests. Only the
# files that decide verdicts, exit codes and outcome classes are mutated:
# in cmd, verdictError and exitCode (execute.go, exit.go) and the end every
# verb shares, finish and nothingRan (finish.go: the report, the hint, the
# exit code; a table run that fired nothing is a setup error), not the
# flags, output and serve plumbing; runplan, which builds every run's plan (its
# shape, expectation and settings) for run, demo and suite; in suite, plan building, on_server
# resolution and the matrix's cells, each with its catalog expectation
# (plan.go, resolve.go, matrix.go), not the YAML reader; in internal/sqldb,
# the error classification of both SQL backends (classify.go), not DSN
# parsing and connecting; in the Redis and MongoDB backends, the
# classification of an insert's reply (classify.go: OK, the duplicate key,
# no reply in time, any other error), which both packages test without a
# server.
# The server-backed tests of a backend package are pointed at a closed port
# so they skip: classification is tested without a server, and a mutant run
# against a live server would take minutes each. race's were too while
# auto.go was not mutated (a mutant that hung TestAutoOnMySQL was killed at
# its time-out before its deferred DROP TABLE, 2026-12-02); auto.go is
# mutated now (issue 48) and only that test reaches it, so race's run on
# the local MariaDB, with racetest clean after. MUTATION_SKIP names tests
# (go test -skip) that cannot see a mutant of the files mutated and would
# only slow every mutant's run: suite's hostile-file test exercises the
# parser alone, and takes 11 of its package's 12 seconds. httpfire's
# effects checks read the stores (effects.go), so its tests run on the
# local servers as release's do (MongoDB, absent here, skipped: its test
# spent 2 s of driver retries at a closed port on every mutant).
# release's tests hold real drivers' requests at the wire, which no closed
# port can stand in for: they run on the local Redis, MariaDB and
# PostgreSQL (MongoDB, absent here, at a closed port), and MUTATION_CLEAN=1
# runs `racetest clean` after the package's run, which drops what a mutant
# killed at its time-out left behind (its runs are registered, their
# processes gone), and prints what it dropped.
# Issue 27 added the packages that judge a team's own code: race (and its
# last-byte release), explore, the script interpreter (its conditions,
# control flow and target; each dialect's classification is a switch of
# constants, tested on the real servers by scripts/handmutants.sh),
# release, httpfire's response rules, effects, burst and target, and the
# catalog's expectation table (scenarios/expect.go; its rows are
# constants, mutated by hand in scripts/hand-mutants.txt).
# Issue 48 added the files that decide verdicts since: --effects auto's
# judgement (runner/twin.go, report/twin.go), the JSON read-back behind
# 'racetest report' and 'report merge' (report/reread.go, cmd/report.go),
# the parallelism probe (httpfire/probe.go, parallel.go), explore's
# reduction (access.go, sql.go), lock waits (internal/sqldb/lockwait.go),
# snapshots (internal/sqlsnap), shards (suite/shard.go), race.Auto; and
# since, the read-only checks (readonly.go in internal/sqldb and script)
# and invariant scope (script/scope.go). explore's tests run with the
# servers up, so that lock-wait and Hermitage mutants can be killed.
TARGETS=(
  "runner|runner|fleet.go outcome.go options.go release.go result.go runner.go target.go wavectx.go twin.go|90|90|"
  "report|report|case.go stats.go merge.go twin.go reread.go|90|90|"
  "cmd|cmd|exit.go execute.go finish.go report.go|90|90|"
  "runplan|runplan|runplan.go|90|90|"
  "suite|suite|plan.go resolve.go matrix.go shard.go schema.go|90|90|MUTATION_SKIP=^TestParseRefusesHostileFiles\$"
  "sqldb|internal/sqldb|classify.go lockwait.go readonly.go catalog.go|90|90|MUTATION_CLEAN=1"
  "sqlsnap|internal/sqlsnap|snapshot.go|90|90|MUTATION_CLEAN=1"
  "redisstore|scenarios/redisstore|classify.go|90|90|RACETEST_REDIS_URL=redis://127.0.0.1:9"
  "redissnap|scenarios/redisstore|snapshot.go|90|90|MUTATION_CLEAN=1 MUTATION_RUN=Snapshot"
  "mongostore|scenarios/mongostore|classify.go|90|90|RACETEST_MONGO_URI=mongodb://127.0.0.1:9/"
  "scenarios|scenarios|expect.go|90|90|"
  "race|race|race.go verdict.go explore.go outcome.go auto.go|90|90|MUTATION_FULL=1 MUTATION_CLEAN=1"
  "lastbyte|race/lastbyte|lastbyte.go|90|90|"
  "explore|explore|explore.go orders.go control.go access.go sql.go sqlscan.go|90|90|MUTATION_COEFFICIENT=4 MUTATION_CLEAN=1 RACETEST_MONGO_URI=mongodb://127.0.0.1:9/"
  "script|script|cond.go interp.go parse.go target.go readonly.go scope.go|90|90|RACETEST_MYSQL_DSN=root@tcp(127.0.0.1:9)/test RACETEST_POSTGRES_URL=postgres://postgres@127.0.0.1:9/test RACETEST_REDIS_URL=redis://127.0.0.1:9 RACETEST_MONGO_URI=mongodb://127.0.0.1:9/"
  "release|release|release.go frame.go wire.go|90|90|MUTATION_CLEAN=1 RACETEST_MONGO_URI=mongodb://127.0.0.1:9/"
  "httpfire|httpfire|rules.go effects.go burst.go target.go probe.go parallel.go lockwatch.go hold.go|90|90|MUTATION_COEFFICIENT=5 MUTATION_CLEAN=1 MUTATION_SKIP=^TestEffectsMongo\$ RACETEST_MONGO_URI=mongodb://127.0.0.1:9/"
  "proxy|proxy|burst.go sql.go|90|90|MUTATION_CLEAN=1"
)

die() { echo "mutation: $*" >&2; exit 2; }

gremlins_bin() {
  local bin=${GREMLINS:-$(go env GOPATH)/bin/gremlins}
  # A go-installed gremlins says "version dev"; the module version is in the binary.
  if [ ! -x "$bin" ] || ! go version -m "$bin" 2>/dev/null | grep -q "github.com/go-gremlins/gremlins[[:space:]]*$GREMLINS_VERSION"; then
    echo "installing gremlins $GREMLINS_VERSION" >&2
    GOFLAGS= go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION" >&2
    bin=$(go env GOPATH)/bin/gremlins
  fi
  echo "$bin"
}

# landed: the commit .ci/landed names (its first line that is not a
# comment), or nothing.
landed() {
  [ -f "$LANDED" ] && grep -v '^[[:space:]]*#' "$LANDED" | awk 'NF { print $1; exit }'
}

# base_ref: the commit a change is measured against (see "The base" at the
# top). What it chose, and why, goes to stderr.
base_ref() {
  local base=${MUTATION_BASE:-} head l n
  head=$(git rev-parse HEAD)
  if [ -n "$base" ]; then
    echo "mutation: base $base (MUTATION_BASE)" >&2
  else
    base=$(git merge-base HEAD main 2>/dev/null || true)
    if [ -n "$base" ] && [ "$base" != "$head" ]; then
      echo "mutation: base $(git rev-parse --short "$base"), this branch's merge base with main" >&2
    else
      l=$(landed || true)
      if [ -n "$l" ] && git rev-parse -q --verify "$l^{commit}" >/dev/null && git merge-base --is-ancestor "$l" HEAD; then
        base=$l
        n=$(git rev-list --count "$base..HEAD")
        echo "mutation: base $(git rev-parse --short "$base") from $LANDED, where the previous landing ended: judging the $n commit(s) since" >&2
      else
        base=$(git rev-parse -q --verify 'HEAD^1' || true)
        if [ -z "$l" ]; then
          echo "mutation: $LANDED names no commit; judging only HEAD's own change (against HEAD^1)" >&2
        else
          echo "mutation: $LANDED names $l, which is not an ancestor of HEAD here (a shallow clone, or history rewritten?); judging only HEAD's own change (against HEAD^1): fetch the history, or correct the file" >&2
        fi
      fi
    fi
  fi
  [ -n "$base" ] || die "no commit to compare with (a repository of one commit?): set MUTATION_BASE, or use --all"
  git rev-parse -q --verify "$base^{commit}" || die "MUTATION_BASE=$base is not a commit here"
}

# touched_files BASE: the Go files that differ from BASE, new ones included.
touched_files() {
  { git diff --name-only "$1" -- '*.go'; git ls-files --others --exclude-standard -- '*.go'; } | sort -u
}

# equivalent FILE LINE COL TYPE: the matching entry of the list (its
# first three fields) and its reason, tab-separated, when this mutant is
# listed. Entries name the file, the mutator and the source line's text
# (trimmed), so that they follow the code when lines move. When a line
# holds two mutants of one mutator, the entry marks the one it means with
# ^^ before its operator (never valid Go), so that it cannot excuse the
# other.
equivalent() {
  local file=$1 line=$2 col=$3 type=$4 text marked
  text=$(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//')
  marked=$(sed -n "${line}p" "$file" | LC_ALL=C awk -v c="$col" '{ print substr($0, 1, c - 1) "^^" substr($0, c) }' |
    sed 's/^[[:space:]]*//;s/[[:space:]]*$//')
  # Through the environment: awk -v would read the backslashes in the code.
  F=$file T=$type S=$text M=$marked awk -F' \\| ' '
    BEGIN { f = ENVIRON["F"]; t = ENVIRON["T"]; s = ENVIRON["S"]; m = ENVIRON["M"] }
    /^#/ || NF < 4 { next }
    $1 == f && $2 == t && ($3 == s || $3 == m) { print $1 " | " $2 " | " $3 "\t" $4; found = 1; exit }
    END { exit !found }' "$EQUIVALENTS"
}

# check_entries NAME DIR FILES: every entry of the list for FILES must name
# exactly one mutant of the run (its line's text, or the text marked with
# ^^ where the line holds two of one mutator). An entry that names several
# would excuse a mutant nobody checked (`if bound <= 0 || bound >= 1 {`
# without ^^ excused bound < 0 with bound > 1); one that names none is
# stale or mistyped. In --diff mode only the changed lines' mutants exist,
# so only an entry naming several is refused there.
check_entries() {
  local name=$1 dir=$2 files=$3 f entry n
  for f in $files; do
    while IFS= read -r entry; do
      n=$(E="$entry" awk -F'\t' '$2 == ENVIRON["E"] { ids[$1] = 1 } END { print length(ids) }' "$OUT/$name.keys")
      if [ "$n" -gt 1 ] || { [ "$n" = 0 ] && [ "$cur" != changed ]; }; then
        echo "   BAD ENTRY in $EQUIVALENTS: it names $n mutants, want exactly one (mark the one meant with ^^ before its operator): $entry" >&2
        bad_entries=1
      fi
    done < <(grep -v '^#' "$EQUIVALENTS" | awk -F' \\| ' -v p="$dir/$f" '$1 == p { print $1 " | " $2 " | " $3 }')
  done
}

# gremlins_failed NAME DIR: gremlins stopped before mutating, almost always
# because the package's tests failed in its coverage run. The log is gone
# with the machine, so say here which tests failed and what they printed
# (go test prints a failing package's whole output: the last lines alone
# named none of them once).
gremlins_failed() {
  local log=$OUT/$1.txt
  {
    echo "the tests that failed in gremlins' run of ./$2 (go test -short -cover):"
    grep -E -e '--- FAIL|^panic:|^FAIL|test timed out' "$log" || echo "  (none named: see the tail below)"
    local t
    for t in $(grep -oE -e '--- FAIL: [^ ]+' "$log" | awk '{print $3}' | sort -u); do
      echo "-- what $t printed:"
      awk -v t="$t" 'on && /^(---|===|FAIL|ok|PASS)/ { exit } index($0, "--- FAIL: " t " ") { on = 1; next } on { print; if (++n > 40) exit }' "$log"
    done
    echo "-- the log's last lines:"
    tail -20 "$log"
  } >&2
  die "gremlins failed on $2 (log: $log)"
}

# measure NAME DIR FILES EFF COV ENV [CUR BASE]: run gremlins, then judge
# its output. CUR (whole or changed) and BASE override how the package is
# judged (--judge: each file on the lines changed since its own last run).
measure() {
  local name=$1 dir=$2 files=$3 eff=$4 cov=$5 envs=$6 excl=() f bn
  local jcur=${7:-} base=${8:-${base:-}}
  for f in "$dir"/*.go; do
    bn=$(basename "$f")
    case "$bn" in *_test.go) continue ;; esac
    if [[ " $files " != *" $bn "* ]]; then excl+=(-E "(^|/)${bn//./\\.}\$"); fi
  done
  # The packages below DIR are other targets (or none): their files are
  # not mutated here, and the go wrapper below keeps their tests out.
  for f in "$dir"/*/; do
    [ -d "$f" ] && excl+=(-E "(^|/)$(basename "$f")/")
  done
  # cur: how this package is judged: on its changed lines (changed), or
  # whole (a package named, --all, or in CI one whose whole run fits the
  # budget).
  cur=$mode
  [ "$mode" = changed ] && [ -n "${whole[$name]:-}" ] && cur=whole
  [ -z "$jcur" ] || cur=$jcur
  local scope=""
  [ "$cur" = changed ] && scope=", the lines changed since $(git rev-parse --short "$base")"
  echo "== $name: $dir/{${files// /,}}$scope (floors: efficacy $eff%, coverage $cov%)"
  local start=$SECONDS json=$OUT/$name.json
  # One worker: on 2 shared cores a second one turns slow tests into
  # spurious time-outs; the coefficient gives a loaded machine room.
  local diff=() envv=() w
  envv+=("PATH=$OUT/bin:$PATH" "MUTATION_DIR=$dir")
  [ "$cur" = changed ] && diff=(--diff "$base")
  # MUTATION_DRY=1: find the mutants, run none (a check of the equivalents
  # list against them, in a minute): gremlins' dry run.
  [ -z "${MUTATION_DRY:-}" ] || diff+=(--dry-run)
  local gf=$GOFLAGS coef=20 clean=""
  for w in $envs; do
    case "$w" in
      # gremlins waits coefficient × the coverage run for each mutant: 20 ×
      # explore's 92 s (load 25) is 30 minutes for every mutant that makes
      # a test hang; 20 × httpfire's 28 s, 9.4 minutes (its tests take 16 s
      # at load 3: 5 leaves them 2.3 minutes).
      MUTATION_COEFFICIENT=*) coef=${w#*=} ;;
      MUTATION_SKIP=*) gf="$gf -skip=${w#*=}" ;;
      # The race package's tests are a user's view of Test and ExpectRace,
      # which under -short run a fifth of the bursts: they are written for
      # the full count.
      MUTATION_FULL=1) gf=${gf//-short/} ;;
      MUTATION_CLEAN=1) clean=1 ;;
      # MUTATION_SERVERS=1: the servers a target points at a closed port
      # answer after all (with MUTATION_RUN naming the few tests, a session
      # can afford them), and racetest clean runs after.
      *127.0.0.1:9[/\)]* | *127.0.0.1:9) if [ "${MUTATION_SERVERS:-}" = 1 ]; then clean=1; else envv+=("$w"); fi ;;
      *) envv+=("$w") ;;
    esac
  done
  # MUTATION_RUN: only the tests it names run against each mutant (go test
  # -run). It can only leave a mutant alive that another test would have
  # killed, never kill one no test notices: a run with it is a lower bound
  # of the efficacy, and its time the tests it names.
  [ -z "${MUTATION_RUN:-}" ] || gf="$gf -run=$MUTATION_RUN"
  # MUTATION_SKIP_TESTS: the same bound, the other way (go test -skip).
  [ -z "${MUTATION_SKIP_TESTS:-}" ] || gf="$gf -skip=$MUTATION_SKIP_TESTS"
  envv+=("GOFLAGS=$gf")
  env "${envv[@]}" "$GREMLINS" unleash --workers 1 --timeout-coefficient "$coef" --invert-logical "${diff[@]}" "${excl[@]}" -o "$json" "./$dir" \
    > "$OUT/$name.txt" 2>&1 || gremlins_failed "$name" "$dir"
  if [ -n "$clean" ]; then
    # On the servers the tests ran on: not on one pointed at a closed port
    # (127.0.0.1:9), which clean, told of it, would call unreachable.
    local cenv=() e
    for e in "${envv[@]}"; do [[ "$e" == *127.0.0.1:9[/\)]* || "$e" == *127.0.0.1:9 ]] || cenv+=("$e"); done
    env "${cenv[@]}" go run . clean > "$OUT/$name.clean" 2>&1 || { cat "$OUT/$name.clean" >&2; die "racetest clean failed after $name's run"; }
    sed 's/^/   after the run, racetest clean: /' "$OUT/$name.clean"
  fi
  local killed=0 lived=0 uncovered=0 timedout=0 skipped=0 switchcase=0 status file line col type why
  while IFS=$'\t' read -r file line col type status; do
    [ -f "$file" ] || file="$dir/$(basename "$file")"
    case "$status" in
      KILLED) killed=$((killed + 1)) ;;
      "TIMED OUT") timedout=$((timedout + 1)) ;;
      LIVED | "NOT COVERED")
        if hit=$(equivalent "$file" "$line" "$col" "$type"); then
          skipped=$((skipped + 1))
          printf '   listed  %-11s %-22s %s:%s  %s\n' "$status" "$type" "$file" "$line" "${hit#*$'\t'}"
          echo "${hit%%$'\t'*}" >> "$OUT/used-equivalents"
        elif [ "$status" = LIVED ]; then
          lived=$((lived + 1))
          printf '   LIVED   %-22s %s:%s:%s  %s\n' "$type" "$file" "$line" "$col" "$(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//')"
        elif sed -n "${line}p" "$file" | grep -q '^[[:space:]]*case '; then
          # gremlins v0.6.0 takes coverage from statement blocks, and a
          # switch's case expression is in none: it never tests these. They
          # are printed and counted apart; their branches have tests (see
          # the efficacy of the statements under them).
          switchcase=$((switchcase + 1))
          printf '   SWITCH CASE %-18s %s:%s:%s  (never run by gremlins)\n' "$type" "$file" "$line" "$col"
        else
          uncovered=$((uncovered + 1))
          printf '   NOT COVERED %-18s %s:%s:%s\n' "$type" "$file" "$line" "$col"
        fi ;;
    esac
  done < <(jq -r '.files[] | .file_name as $f | .mutations[] | [$f, .line, .column, .type, .status] | @tsv' "$json")
  # Every mutant's keys, whatever its status, for the entries check below:
  # an entry must name exactly one mutant.
  local id=0
  while IFS=$'\t' read -r file line col type; do
    [ -f "$file" ] || file="$dir/$(basename "$file")"
    id=$((id + 1))
    printf '%s\t%s | %s | %s\n' "$id" "$file" "$type" "$(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//')"
    printf '%s\t%s | %s | %s\n' "$id" "$file" "$type" "$(sed -n "${line}p" "$file" | LC_ALL=C awk -v c="$col" '{ print substr($0, 1, c - 1) "^^" substr($0, c) }' | sed 's/^[[:space:]]*//;s/[[:space:]]*$//')"
  done < <(jq -r '.files[] | .file_name as $f | .mutations[] | [$f, .line, .column, .type] | @tsv' "$json") > "$OUT/$name.keys"
  check_entries "$name" "$dir" "$files"
  local tested=$((killed + lived)) all=$((killed + lived + uncovered))
  local e=100 c=100
  [ "$tested" -gt 0 ] && e=$((100 * killed / tested))
  [ "$all" -gt 0 ] && c=$((100 * tested / all))
  local raw=100
  [ $((all + switchcase)) -gt 0 ] && raw=$((100 * tested / (all + switchcase)))
  printf '   %s: efficacy %d%% (%d killed, %d lived), coverage %d%% (%d not covered; %d%% counting %d switch-case mutants); %d listed, %d timed out; %ds\n' \
    "$name" "$e" "$killed" "$lived" "$c" "$uncovered" "$raw" "$switchcase" "$skipped" "$timedout" $((SECONDS - start))
  printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" "$e" "$c" "$killed" "$lived" "$uncovered" "$skipped" $((SECONDS - start)) >> "$OUT/summary.tsv"
  # The run as a row of the ledger ($WHOLE): --judge prints them, and
  # appends them with MUTATION_RECORD=1.
  local lbase=-
  [ "$cur" != changed ] || lbase=$(git rev-parse --short "$base")
  printf '%-11s %-20s %s  %-8s %-6s %-5s %s\n' "$name" "${files// /,}" "$(git rev-parse --short HEAD)" "$lbase" "$killed" "$lived" "$skipped" >> "$OUT/ledger.txt"
  if [ -z "${MUTATION_DRY:-}" ] && { [ "$e" -lt "$eff" ] || [ "$c" -lt "$cov" ]; }; then
    echo "   $name is under its floor (efficacy $eff%, coverage $cov%): add a test that fails on each LIVED mutant above," >&2
    echo "   or list it in $EQUIVALENTS with the reason no test can tell it apart" >&2
    failed+=("$name")
  fi
}

# table: the runs recorded in $WHOLE, per target and file, and whether
# each mutated file at HEAD is the file a run judged. A file is judged by
# the last whole run (base -) that mutated it, when its code at HEAD is the
# code of that run's commit, or when a run of the lines changed since that
# commit (base = it) was at a commit whose code is HEAD's. Exits 1 when a
# run on record is under its target's floor, or a file is not judged.
OWED=scripts/mutation-owed.txt

# same_code COMMIT PATH: PATH holds the same code at COMMIT and at HEAD,
# comments and layout aside (scripts/samecode: the same tokens), so a
# change to its comments alone keeps its judgement: gremlins mutates
# tokens, and a comment holds none.
SAMECODE=
same_code() {
  git diff --quiet "$1" HEAD -- "$2" && return 0
  if [ -z "$SAMECODE" ]; then
    SAMECODE=$(mktemp -d)/samecode
    go build -o "$SAMECODE" ./scripts/samecode || die "cannot build scripts/samecode"
  fi
  local d rc=0
  d=$(mktemp -d)
  git show "$1:$2" > "$d/old.go" 2>/dev/null && git show "HEAD:$2" > "$d/new.go" 2>/dev/null || { rm -rf "$d"; return 1; }
  "$SAMECODE" "$d/old.go" "$d/new.go" || rc=$?
  rm -rf "$d"
  return $rc
}

table() {
  local bad=0 owed=0 t name dir files eff f row rows verdict
  for t in "${TARGETS[@]}"; do
    IFS='|' read -r name dir files eff _ <<< "$t"
    rows=$(awk -v n="$name" '$1 == n' <(grep -v '^#' "$WHOLE"))
    # A target with no run on record passes only while each of its files
    # is owed ($OWED): the per-file verdicts below say so, or fail.
    [ -n "$rows" ] || echo "$name: no run on record"
    while [ -n "$rows" ] && read -r _ fl at base k l listed; do
      local what="whole"
      [ "$base" = - ] || what="the lines changed since $base"
      if [ $((k + l)) -eq 0 ]; then
        echo "$name ($fl): $what at $at: no mutant gremlins could run ($listed listed)"
        continue
      fi
      local e=$((100 * k / (k + l)))
      echo "$name ($fl): $what at $at: $k killed, $l lived, $listed listed: efficacy $e%"
      if [ "$e" -lt "$eff" ]; then echo "  under the floor ($eff%)"; bad=1; fi
    done <<< "$rows"
    for f in $files; do
      verdict=
      local w
      w=$(awk -v f="$f" '$4 == "-" && index("," $2 ",", "," f ",") { c = $3 } END { print c }' <<< "$rows")
      if [ -z "$w" ]; then
        verdict="NOT JUDGED: no whole run mutated it"
      elif same_code "$w" "$dir/$f"; then
        verdict="judged: the code at HEAD is the code at $w"
      else
        for row in $(awk -v b="$w" -v f="$f" '$4 == b && index("," $2 ",", "," f ",") { print $3 }' <<< "$rows"); do
          if same_code "$row" "$dir/$f"; then
            verdict="judged: whole at $w, the lines changed since at $row, whose code is HEAD's"
          fi
        done
        [ -n "$verdict" ] || verdict="NOT JUDGED: changed since the run at $w ($(git diff --shortstat "$w" HEAD -- "$dir/$f" | sed 's/^ *//'))"
      fi
      # A file on the owed list ($OWED) is a debt said out loud: not judged
      # at HEAD, with the reason, and the table names it. Once judged, its
      # entry must go (a stale entry fails), so the list only shrinks by
      # runs, never by forgetting.
      local owed_why
      owed_why=$({ grep -v '^#' "$OWED" 2>/dev/null || true; } | awk -F' [|] ' -v p="$dir/$f" '$1 == p { print $2 " | " $3; exit }')
      if [ -n "$owed_why" ]; then
        if [[ "$verdict" == NOT* ]]; then
          verdict="OWED since ${owed_why%% | *}: ${verdict#NOT JUDGED: } — ${owed_why#* | }"
          owed=$((owed + 1))
        else
          verdict="$verdict; but $OWED still lists it as owed: remove its line"
          bad=1
        fi
      fi
      echo "  $dir/$f: $verdict"
      [[ "$verdict" != NOT* ]] || bad=1
    done
  done
  while IFS= read -r f; do
    local known=
    for t in "${TARGETS[@]}"; do
      IFS='|' read -r name dir files _ <<< "$t"
      for b in $files; do [ "$dir/$b" != "$f" ] || known=1; done
    done
    [ -n "$known" ] || { echo "$OWED lists $f, which is no target's file: remove its line"; bad=1; }
  done < <({ grep -v '^#' "$OWED" 2>/dev/null || true; } | awk -F' [|] ' 'NF { print $1 }')
  [ "$owed" = 0 ] || echo "mutation: $owed file(s) owed a mutation run at this commit ($OWED): a debt, each with its reason"
  return $bad
}

# scope: every non-test .go file of a target's package is mutated (in
# TARGETS: any target of its directory, as redisstore's classify.go and
# redissnap's snapshot.go, which want different servers) or named in
# $SCOPE with the reason it decides no verdict; and every file TARGETS or
# $SCOPE names exists. Exits 1 otherwise, naming the file and what to do.
SCOPE=scripts/mutation-scope.txt
scope() {
  local bad=0 t u name dir files f bn udir ufiles
  for t in "${TARGETS[@]}"; do
    IFS='|' read -r name dir files _ <<< "$t"
    for bn in $files; do
      [ -f "$dir/$bn" ] || { echo "$dir/$bn: in TARGETS ($name) but no such file: correct TARGETS"; bad=1; }
    done
    # The files of every target of this directory.
    for u in "${TARGETS[@]}"; do
      IFS='|' read -r _ udir ufiles _ <<< "$u"
      [ "$udir" != "$dir" ] || [[ " $files " == *" $ufiles "* ]] || files="$files $ufiles"
    done
    for f in "$dir"/*.go; do
      bn=$(basename "$f")
      case "$bn" in *_test.go) continue ;; esac
      [[ " $files " == *" $bn "* ]] && continue
      if ! grep -v '^#' "$SCOPE" | awk -F' [|] ' -v p="$f" '$1 == p && NF >= 2 && $2 != "" { found = 1 } END { exit !found }'; then
        echo "$f: decides a verdict or not? it is in neither $name's files in TARGETS (scripts/mutation.sh) nor $SCOPE: add it to TARGETS if it decides, reads or re-reads a verdict, else name it in $SCOPE with the reason"
        bad=1
      fi
    done
  done
  while IFS= read -r f; do
    [ -f "$f" ] || { echo "$f: named in $SCOPE but no such file: remove its line"; bad=1; }
  done < <(grep -v '^#' "$SCOPE" | awk -F' [|] ' 'NF { print $1 }')
  [ "$bad" = 1 ] || echo "mutation scope: every file of the $(( ${#TARGETS[@]} )) target packages is mutated or named with its reason in $SCOPE"
  return $bad
}

# last_whole NAME FILE: the commit of the last whole run on record that
# mutated FILE of target NAME (nothing when none did).
last_whole() {
  awk -v n="$1" -v f="$2" '$1 == n && $4 == "-" && index("," $2 ",", "," f ",") { c = $3 } END { print c }' <(grep -v '^#' "$WHOLE")
}

# judged NAME DIR FILE: whether the ledger judges FILE at HEAD's code (the
# rule of table below).
judged() {
  local w row
  w=$(last_whole "$1" "$3")
  [ -n "$w" ] || return 1
  same_code "$w" "$2/$3" && return 0
  for row in $(awk -v n="$1" -v b="$w" -v f="$3" '$1 == n && $4 == b && index("," $2 ",", "," f ",") { print $3 }' <(grep -v '^#' "$WHOLE")); do
    same_code "$row" "$2/$3" && return 0
  done
  return 1
}

mode=changed
names=()
for a in "$@"; do
  case "$a" in
    --all) mode=all ;;
    --table) table; exit $? ;;
    --scope) scope; exit $? ;;
    --judge) mode=judge ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown flag $a (see --help)" ;;
    *) [ "$mode" = judge ] || mode=named; names+=("$a") ;;
  esac
done

selected=()
jobs=() # --judge: name|dir|files|eff|cov|envs|cur|base
case $mode in
  all) selected=("${TARGETS[@]}") ;;
  named)
    for n in "${names[@]}"; do
      hit=
      for t in "${TARGETS[@]}"; do [ "${t%%|*}" = "$n" ] && { selected+=("$t"); hit=1; }; done
      [ -n "$hit" ] || die "unknown package $n (one of: $(printf '%s ' "${TARGETS[@]%%|*}"))"
    done ;;
  judge)
    # Each file the ledger does not judge at HEAD: never run whole, so
    # whole; else on the lines changed since its last whole run. The
    # code must be committed: a row names HEAD.
    [ -z "$(git status --porcelain -- '*.go')" ] || die "--judge records runs at HEAD: commit the Go files first (git status)"
    for t in "${TARGETS[@]}"; do
      IFS='|' read -r name dir files eff cov envs <<< "$t"
      if [ ${#names[@]} -gt 0 ] && [[ " ${names[*]} " != *" $name "* ]]; then continue; fi
      declare -A since=()
      newfiles=""
      for f in $files; do
        # MUTATION_FILES: judge only these files (a session splits a
        # target's files across runs with different MUTATION_RUN tests).
        if [ -n "${MUTATION_FILES:-}" ] && [[ " $MUTATION_FILES " != *" $f "* ]]; then continue; fi
        judged "$name" "$dir" "$f" && continue
        w=$(last_whole "$name" "$f")
        if [ -z "$w" ]; then newfiles="$newfiles $f"; else since[$w]="${since[$w]:-} $f"; fi
      done
      [ -z "$newfiles" ] || { jobs+=("$name|$dir|${newfiles# }|$eff|$cov|$envs|whole|"); echo "mutation: $name: ${newfiles# } never run whole: whole"; }
      for w in "${!since[@]}"; do
        jobs+=("$name|$dir|${since[$w]# }|$eff|$cov|$envs|changed|$w")
        echo "mutation: $name: ${since[$w]# } changed since the whole run at $w: those lines"
      done
      unset since
    done
    [ ${#jobs[@]} -gt 0 ] || { echo "mutation: the ledger judges every file at HEAD; nothing to run"; exit 0; } ;;
  changed)
    base=$(base_ref)
    touched=$(touched_files "$base")
    budget=${MUTATION_BUDGET:-1800}
    [[ "$budget" =~ ^[0-9]+$ ]] || die "MUTATION_BUDGET=$budget is not a number of seconds"
    # The packages touched (any .go file, tests included), cheapest whole
    # run first: each is judged whole while its measured cost fits what is
    # left of the budget, else on its changed lines.
    spent=0
    while IFS=$'\t' read -r cost t; do
      IFS='|' read -r name dir files _ <<< "$t"
      if [[ " ${MUTATION_BY_HAND:-} " == *" $name "* ]]; then
        echo "mutation: $name: touched, but judged by hand only (MUTATION_BY_HAND: its tests reach the changed lines only with the servers up, and a mutant costs a run of them); run 'scripts/mutation.sh $name'"
        continue
      fi
      hit=
      unjudged=
      for f in $files; do
        if grep -qxF "$dir/$f" <<< "$touched"; then
          hit=1
          if ! judged "$name" "$dir" "$f" && ! { grep -v '^#' "$OWED" 2>/dev/null || true; } | awk -F' [|] ' -v p="$dir/$f" '$1 == p { f = 1 } END { exit !f }'; then
            unjudged="$unjudged $f"
          fi
        fi
      done
      # MUTATION_TRUST_LEDGER=1 (CI): a touched file the ledger judges at
      # HEAD's code (or owes, said out loud) is not mutated again: the
      # ledger's rows are the runs of this very code, and the step that
      # checks them (--table) has passed. Only what they do not cover runs.
      if [ "${MUTATION_TRUST_LEDGER:-}" = 1 ] && [ -n "$hit" ] && [ -z "$unjudged" ]; then
        echo "mutation: $name: every touched file it mutates is judged at HEAD's code by the ledger ($WHOLE) or owed ($OWED): not run again"
        continue
      fi
      if [ "$cost" != - ] && [ $((spent + cost)) -le "$budget" ]; then
        spent=$((spent + cost))
        whole[$name]=1
        selected+=("$t")
        echo "mutation: $name: touched; judged whole (measured ${cost}s; ${spent}s of the ${budget}s budget planned)"
      elif [ -n "$hit" ]; then
        selected+=("$t")
        if [ "$cost" = - ]; then
          echo "mutation: $name: touched; no measured cost in $COSTS, so judged on its changed lines only"
        else
          echo "mutation: $name: touched; a whole run (measured ${cost}s) does not fit the $((budget - spent))s left of the budget: judged on its changed lines; run 'scripts/mutation.sh $name' by hand"
        fi
      else
        why="a whole run (measured ${cost}s) does not fit the $((budget - spent))s left"
        [ "$cost" != - ] || why="a whole run has no measured cost in $COSTS"
        echo "mutation: $name: only files the gate does not mutate changed ($(grep "^$dir/[^/]*\.go\$" <<< "$touched" | tr '\n' ' ' | sed 's/ $//')), and $why: no mutant run; run 'scripts/mutation.sh $name' by hand"
      fi
    done < <(for t in "${TARGETS[@]}"; do
      IFS='|' read -r name dir _ <<< "$t"
      grep -q "^$dir/[^/]*\.go\$" <<< "$touched" || continue
      printf '%s\t%s\n' "$( { [ -f "$COSTS" ] && grep -v '^#' "$COSTS"; } | awk -v n="$name" '$1 == n { print $2; f = 1; exit } END { if (!f) print "-" }')" "$t"
    done | sort -t$'\t' -k1,1n)
    echo "mutation: whole-package runs planned: ${spent}s of the ${budget}s budget (MUTATION_BUDGET), at the costs measured in $COSTS"
    if [ ${#selected[@]} -eq 0 ]; then
      echo "mutation: this change touches no file the gate mutates; nothing to test (--all runs every package whole)"
      exit 0
    fi ;;
esac

# The tests run as a developer runs them: servers optional (a backend's
# server tests are pointed at a closed port above and skip; under
# RACETEST_REQUIRE_SERVERS, which .ci/run sets, a skip would fail the run
# gremlins measures first), and -short, which skips the tests that build
# the racetest binary (process plumbing, not the verdict path, and a build
# per mutant).
unset RACETEST_REQUIRE_SERVERS
# Nor clusters: a cluster test named by RACETEST_CLUSTER_* runs against it,
# and fails when it has stopped (as in .ci/run once, after its cluster step).
unset RACETEST_REQUIRE_CLUSTERS $(compgen -e | grep '^RACETEST_CLUSTER_' || true)
# -count=1: gremlins times each mutant out at its coefficient × the
# coverage run, and a coverage run served from the test cache (a dry run
# before it, the same flags) took 0.6 s where the tests take 15: every
# mutant of httpfire then "timed out", counted as killed (2026-12-02).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-short -count=1"

command -v jq >/dev/null || die "jq is needed to read gremlins' output: apt-get install jq"
GREMLINS=$(gremlins_bin)
rm -rf "$OUT" && mkdir -p "$OUT/bin"
# gremlins v0.6.0 --diff compares the paths of 'git diff' (from the
# repository's root) with paths relative to the package it mutates, and
# so matches nothing in a package below the root; and it takes a hunk's
# added lines as one span from its first. The git it runs here diffs
# relative to the package (MUTATION_DIR) and without context (-U0), so
# that every hunk is one run of added lines: the changed lines, exactly.
cat > "$OUT/bin/git" <<EOF
#!/bin/sh
if [ "\$1" = diff ]; then shift; exec "$(command -v git)" diff -U0 --relative="\$MUTATION_DIR/" "\$@"; fi
exec "$(command -v git)" "\$@"
EOF
chmod +x "$OUT/bin/git"
# gremlins v0.6.0 gathers coverage with 'go test ./DIR/...': every package
# below DIR too (scenarios' dozen backends, release/bench), minutes of tests
# that cannot see a mutant of DIR, and server tests that can fail under
# load. The go it runs tests ./DIR alone.
cat > "$OUT/bin/go" <<EOF
#!/bin/sh
if [ "\$1" = test ]; then
  for a in "\$@"; do
    shift
    if [ "\$a" = "./\$MUTATION_DIR/..." ]; then set -- "\$@" "./\$MUTATION_DIR"; else set -- "\$@" "\$a"; fi
  done
fi
exec "$(command -v go)" "\$@"
EOF
chmod +x "$OUT/bin/go"
failed=()
bad_entries=
total=$SECONDS
for t in "${selected[@]}"; do
  IFS='|' read -r name dir files eff cov envs <<< "$t"
  measure "$name" "$dir" "$files" "$eff" "$cov" "$envs"
done
for j in "${jobs[@]}"; do
  IFS='|' read -r name dir files eff cov envs jcur jbase <<< "$j"
  measure "$name" "$dir" "$files" "$eff" "$cov" "$envs" "$jcur" "$jbase"
  # A run of changed lines sees only their mutants: the stale-entry check
  # below is for whole runs.
  [ "$jcur" != whole ] || selected+=("$name|$dir|$files")
done

# An entry of the list that matched no mutant of a package that ran is
# stale: the code changed, or a test now kills the mutant. (Not judged in
# --diff mode, which sees only the changed lines' mutants.)
for t in "${selected[@]}"; do
  IFS='|' read -r name dir files _ <<< "$t"
  [ -z "${MUTATION_DRY:-}" ] || continue
  [ "$mode" != changed ] || [ -n "${whole[$name]:-}" ] || continue
  for f in $files; do
    grep -v '^#' "$EQUIVALENTS" | awk -F' \\| ' -v p="$dir/$f" '$1 == p { print $1 " | " $2 " | " $3 }' |
      while IFS= read -r entry; do
        if ! grep -qxF -- "$entry" "$OUT/used-equivalents" 2>/dev/null; then
          echo "   stale entry in $EQUIVALENTS (no such mutant lives now): $entry"
          stale=1
        fi
      done
  done
done

echo "mutation: ${#selected[@]} package(s) in $((SECONDS - total))s; raw output in $OUT"
if [ "$mode" = judge ] && [ -z "${MUTATION_DRY:-}" ]; then
  echo "mutation: the runs as rows of $WHOLE:"
  cat "$OUT/ledger.txt"
  if [ "${MUTATION_RECORD:-}" = 1 ] && [ ${#failed[@]} -eq 0 ] && [ -z "$bad_entries" ]; then
    cat "$OUT/ledger.txt" >> "$WHOLE"
    echo "mutation: recorded in $WHOLE (MUTATION_RECORD=1): commit it with the change it judges"
  fi
fi
if [ -n "$bad_entries" ]; then
  echo "mutation: $EQUIVALENTS has entries that do not name exactly one mutant (see BAD ENTRY above): correct them" >&2
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "mutation: under the floor: ${failed[*]}" >&2
  exit 1
fi
