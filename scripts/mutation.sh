#!/usr/bin/env bash
# Mutation testing of racetest's verdict path (issue 17): a verdict is only as
# trustworthy as the tests that would notice it going wrong. gremlins makes
# one small change at a time (> into >=, + into -, a condition negated) in
# the code that decides verdicts, exit codes and outcome classes, and runs
# the package's tests; a change no test notices ("lived") is a bug the tests
# would let through.
#
#   scripts/mutation.sh                 the packages the change touched (see below)
#   scripts/mutation.sh --all           every package of the verdict path
#   scripts/mutation.sh runner suite    the packages named (names as in TARGETS)
#
# Which packages a change touched: those with a file (code or test) that
# differs from the merge base with main, committed or not; on main itself,
# those the last commit touched. The whole verdict path takes longer than CI
# can give it on 2 shared cores (the figures are in the closing note of
# issue 17), so .ci/run runs the touched packages and --all is for a release
# or by hand.
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
#   MUTATION_BASE   the commit to compare with (default: merge-base with main)
#   MUTATION_OUT    where the raw gremlins output goes (default /tmp/racetest-mutation)
#   GREMLINS        the gremlins binary (default: $(go env GOPATH)/bin/gremlins)
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS_VERSION=v0.6.0
OUT=${MUTATION_OUT:-/tmp/racetest-mutation}
EQUIVALENTS=scripts/mutation-equivalents.txt

# TARGETS: name | package dir | files mutated (the verdict path in it) |
# efficacy floor | coverage floor | environment for its tests. The SQL
# backends' error classification lives in internal/sqldb (one SQL layer).
# The server-backed tests of a backend package are pointed at a closed port
# so they skip: classification is tested without a server, and a mutant run
# against a live server would take minutes each.
TARGETS=(
  "runner|runner|outcome.go options.go release.go result.go runner.go target.go|90|90|"
  "report|report|case.go stats.go|90|90|"
  "cmd|cmd|exit.go execute.go|90|90|"
  "suite|suite|plan.go resolve.go|90|90|"
  "sqldb|internal/sqldb|classify.go mysql.go postgres.go|90|90|RACETEST_MYSQL_DSN=root@tcp(127.0.0.1:9)/test RACETEST_POSTGRES_URL=postgres://postgres@127.0.0.1:9/test"
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

touched_dirs() {
  local base=${MUTATION_BASE:-}
  if [ -z "$base" ]; then
    base=$(git merge-base HEAD main 2>/dev/null || true)
    if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then base=HEAD~1; fi
  fi
  { git diff --name-only "$base" -- '*.go'; git ls-files --others --exclude-standard -- '*.go'; } |
    xargs -r -n1 dirname | sort -u
}

# equivalent FILE LINE COL TYPE: the reason, when this mutant is listed.
# Entries name the file, the mutator and the source line's text (trimmed),
# so that they follow the code when lines move.
equivalent() {
  local file=$1 line=$2 type=$4 text
  text=$(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//')
  awk -F' \\| ' -v f="$file" -v t="$type" -v s="$text" '
    /^#/ || NF < 4 { next }
    $1 == f && $2 == t && $3 == s { print $4; found = 1; exit }
    END { exit !found }' "$EQUIVALENTS"
}

# measure NAME DIR FILES EFF COV ENV: run gremlins, then judge its output.
measure() {
  local name=$1 dir=$2 files=$3 eff=$4 cov=$5 envs=$6 excl=() f base
  for f in "$dir"/*.go; do
    base=$(basename "$f")
    case "$base" in *_test.go) continue ;; esac
    if [[ " $files " != *" $base "* ]]; then excl+=(-E "(^|/)${base//./\\.}\$"); fi
  done
  echo "== $name: $dir/{${files// /,}} (floors: efficacy $eff%, coverage $cov%)"
  local start=$SECONDS json=$OUT/$name.json
  # One worker: on 2 shared cores a second one turns slow tests into
  # spurious time-outs; the coefficient gives a loaded machine room.
  env $envs "$GREMLINS" unleash --workers 1 --timeout-coefficient 20 "${excl[@]}" -o "$json" "./$dir" \
    > "$OUT/$name.txt" 2>&1 || { tail -20 "$OUT/$name.txt" >&2; die "gremlins failed on $dir (log: $OUT/$name.txt)"; }
  local killed=0 lived=0 uncovered=0 timedout=0 skipped=0 switchcase=0 status file line col type why
  while IFS=$'\t' read -r file line col type status; do
    [ -f "$file" ] || file="$dir/$(basename "$file")"
    case "$status" in
      KILLED) killed=$((killed + 1)) ;;
      "TIMED OUT") timedout=$((timedout + 1)) ;;
      LIVED | "NOT COVERED")
        if why=$(equivalent "$file" "$line" "$col" "$type"); then
          skipped=$((skipped + 1))
          printf '   listed  %-11s %-22s %s:%s  %s\n' "$status" "$type" "$file" "$line" "$why"
          echo "$file | $type | $line" >> "$OUT/used-equivalents"
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
  local tested=$((killed + lived)) all=$((killed + lived + uncovered))
  local e=100 c=100
  [ "$tested" -gt 0 ] && e=$((100 * killed / tested))
  [ "$all" -gt 0 ] && c=$((100 * tested / all))
  local raw=100
  [ $((all + switchcase)) -gt 0 ] && raw=$((100 * tested / (all + switchcase)))
  printf '   %s: efficacy %d%% (%d killed, %d lived), coverage %d%% (%d not covered; %d%% counting %d switch-case mutants); %d listed, %d timed out; %ds\n' \
    "$name" "$e" "$killed" "$lived" "$c" "$uncovered" "$raw" "$switchcase" "$skipped" "$timedout" $((SECONDS - start))
  printf '%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$name" "$e" "$c" "$killed" "$lived" "$uncovered" "$skipped" $((SECONDS - start)) >> "$OUT/summary.tsv"
  if [ "$e" -lt "$eff" ] || [ "$c" -lt "$cov" ]; then
    echo "   $name is under its floor (efficacy $eff%, coverage $cov%): add a test that fails on each LIVED mutant above," >&2
    echo "   or list it in $EQUIVALENTS with the reason no test can tell it apart" >&2
    failed+=("$name")
  fi
}

mode=changed
names=()
for a in "$@"; do
  case "$a" in
    --all) mode=all ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown flag $a (see --help)" ;;
    *) mode=named; names+=("$a") ;;
  esac
done

selected=()
case $mode in
  all) selected=("${TARGETS[@]}") ;;
  named)
    for n in "${names[@]}"; do
      hit=
      for t in "${TARGETS[@]}"; do [ "${t%%|*}" = "$n" ] && { selected+=("$t"); hit=1; }; done
      [ -n "$hit" ] || die "unknown package $n (one of: $(printf '%s ' "${TARGETS[@]%%|*}"))"
    done ;;
  changed)
    dirs=$(touched_dirs)
    for t in "${TARGETS[@]}"; do
      IFS='|' read -r _ dir _ <<< "$t"
      if grep -qx "$dir" <<< "$dirs"; then selected+=("$t"); fi
    done
    if [ ${#selected[@]} -eq 0 ]; then
      echo "mutation: this change touches no package of the verdict path; nothing to test (--all runs them all)"
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
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-short"

command -v jq >/dev/null || die "jq is needed to read gremlins' output: apt-get install jq"
GREMLINS=$(gremlins_bin)
rm -rf "$OUT" && mkdir -p "$OUT"
failed=()
total=$SECONDS
for t in "${selected[@]}"; do
  IFS='|' read -r name dir files eff cov envs <<< "$t"
  measure "$name" "$dir" "$files" "$eff" "$cov" "$envs"
done

# An entry of the list that matched no mutant of a package that ran is stale.
for t in "${selected[@]}"; do
  IFS='|' read -r _ dir files _ <<< "$t"
  for f in $files; do
    grep -v '^#' "$EQUIVALENTS" | awk -F' \\| ' -v p="$dir/$f" '$1 == p { print $1 " | " $2 " | " $3 }' |
      while IFS= read -r entry; do
        file=${entry%% | *}; rest=${entry#* | }; type=${rest%% | *}; text=${rest#* | }
        if ! awk -F' \\| ' -v f="$file" -v t="$type" '$1 == f && $2 == t { print $3 }' "$OUT/used-equivalents" 2>/dev/null |
          while read -r l; do sed -n "${l}p" "$file" | sed 's/^[[:space:]]*//;s/[[:space:]]*$//'; done | grep -qxF -- "$text"; then
          echo "   stale entry in $EQUIVALENTS (no such mutant now): $entry"
        fi
      done
  done
done

echo "mutation: ${#selected[@]} package(s) in $((SECONDS - total))s; raw output in $OUT"
if [ ${#failed[@]} -gt 0 ]; then
  echo "mutation: under the floor: ${failed[*]}" >&2
  exit 1
fi
