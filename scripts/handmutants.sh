#!/usr/bin/env bash
# Hand mutants: the one-line changes gremlins cannot make (issue 27). gremlins
# never changes a constant or a call, so an error classification that slips
# (Refused becomes Failed), a row of the expectation table that flips (LOST
# becomes RACE) or a default constant set to 0 looks to it like nothing.
# scripts/hand-mutants.txt lists such changes, each with the test that must
# notice it; this script applies each to a copy of the tree, runs that test,
# and fails when the test still passes (the mutant "lived").
#
#   scripts/handmutants.sh              every mutant in the list
#   scripts/handmutants.sh script race  the mutants of the packages named
#
# HANDMUTANTS_LIST names another list (default scripts/hand-mutants.txt).
# HANDMUTANTS_SHARD=K/N runs every Nth block from the Kth (with its own
# HANDMUTANTS_OUT), so that N parts run side by side.
# HANDMUTANTS_SINCE=COMMIT (CI: the commit .ci/landed names, where the last
# landing, whose CI ran every mutant, ended) leaves out a mutant that cannot
# have changed since: its block is in the list as it was at COMMIT, and no
# file changed since COMMIT in a package its test builds (go list -deps
# -test, this module's packages). A change anywhere else that a test could
# read (go.mod, a testdata directory outside those packages) runs every
# mutant; text (*.md, docs/), the mutation ledger, this script and .ci/ do
# not, and testdata/services counts as httpfire's (only its tests read it).
# Each mutant left out is counted and the reason printed.
# HANDMUTANTS_DRY=1 lists the mutants that would run, and runs none.
#
# Each mutant's test runs first on the unchanged copy and must pass: a test
# that fails anyway (a server down under RACETEST_REQUIRE_SERVERS, a flaky
# test) would "kill" every mutant and prove nothing, so it stops the script.
# Server-backed mutants need the servers: without them their test skips,
# the mutant lives, and the script says so (as it should: it was not
# tested). The working tree is never changed: the copy is under
# HANDMUTANTS_OUT (default /tmp/racetest-handmutants).
set -euo pipefail
cd "$(dirname "$0")/.."

LIST=${HANDMUTANTS_LIST:-scripts/hand-mutants.txt}
OUT=${HANDMUTANTS_OUT:-/tmp/racetest-handmutants}
die() { echo "handmutants: $*" >&2; exit 2; }

want=("$@")
selected() {
  [ ${#want[@]} -eq 0 ] && return 0
  local w
  for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}

rm -rf "$OUT" && mkdir -p "$OUT/tree"
# The tracked files and the new ones, as they are now (uncommitted edits
# included), without .git.
{ git ls-files; git ls-files --others --exclude-standard; } | sort -u |
  while IFS= read -r f; do [ -e "$f" ] && echo "$f"; done > "$OUT/files"
rsync -a --files-from="$OUT/files" ./ "$OUT/tree/"

# A block of the list: lines "pkg", "file", "test", "env" (optional),
# "from", "to", "why", ended by a blank line or the end of the file.
killed=0 lived=0 n=0 seen=0 start=$SECONDS
shard_k=1 shard_n=1
if [ -n "${HANDMUTANTS_SHARD:-}" ]; then
  [[ "$HANDMUTANTS_SHARD" =~ ^([0-9]+)/([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
    die "HANDMUTANTS_SHARD=$HANDMUTANTS_SHARD: want K/N, K from 1 to N"
  shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
fi
declare -A baseline=()
lived_list=()

# HANDMUTANTS_SINCE: what changed since the commit, and the list as it was.
since=${HANDMUTANTS_SINCE:-}
declare -A old_block=() dep_changed=()
changed=() unchanged=0
if [ -n "$since" ]; then
  if ! git merge-base --is-ancestor "$since" HEAD 2>/dev/null; then
    echo "handmutants: HANDMUTANTS_SINCE=$since is not an ancestor of HEAD: every mutant runs"
    since=
  fi
fi
if [ -n "$since" ]; then
  # testdata/services holds the services only httpfire's tests start
  # (httpfire/services_test.go): a change there is a change of httpfire.
  mapfile -t changed < <({ git diff --name-only "$since" --; git ls-files --others --exclude-standard; } |
    sed 's|^testdata/services/|httpfire/testdata-services/|' | sort -u)
  mapfile -t pkgdirs < <(go list -f '{{.Dir}}' ./... | sed "s|^$PWD/\{0,1\}||" | grep -v '^$' | sort -u)
  for f in "${changed[@]}"; do
    case "$f" in
      # Read by no test: text, the mutation ledger and scripts, CI's own
      # script (checked: no test opens .ci/ or scripts/*.sh).
      *.md | docs/* | scripts/mutation* | scripts/handmutants.sh | .ci/* | .gitignore) continue ;;
    esac
    inpkg=
    for d in "${pkgdirs[@]}"; do
      case "$f" in "$d"/*) inpkg=1; break ;; esac
    done
    if [ -z "$inpkg" ] && [ "$f" != "$LIST" ]; then
      echo "handmutants: $f changed since $since and may be read by any test: every mutant runs"
      since=
      break
    fi
  done
fi
if [ -n "$since" ]; then
  # The blocks of the list at $since, each as one key.
  key= pkg= file= test= env= from= to=
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      '#'*) continue ;;
      '') [ -z "$from" ] || old_block["$pkg|$file|$test|$env|$from|$to"]=1; pkg= file= test= env= from= to= ;;
      pkg\ *) pkg=${line#pkg }; pkg=${pkg#"${pkg%%[! ]*}"} ;;
      file\ *) file=${line#file }; file=${file#"${file%%[! ]*}"} ;;
      test\ *) test=${line#test }; test=${test#"${test%%[! ]*}"} ;;
      env\ *) env=${line#env }; env=${env#"${env%%[! ]*}"} ;;
      from\ *) from=${line#from }; from=${from#"${from%%[! ]*}"} ;;
      to\ *) to=${line#to }; to=${to#"${to%%[! ]*}"} ;;
    esac
  done < <(git show "$since:$LIST" 2>/dev/null || true)
  [ -z "$from" ] || old_block["$pkg|$file|$test|$env|$from|$to"]=1
fi

# moved PKG: whether a file changed since $since in a package PKG's tests
# build (cached per package).
moved() {
  local pkg=$1 d f
  if [ -z "${dep_changed[$pkg]:-}" ]; then
    dep_changed[$pkg]=no
    while IFS= read -r d; do
      for f in "${changed[@]}"; do
        case "$f" in "$d"/*) dep_changed[$pkg]=yes; break 2 ;; esac
      done
    done < <(go list -deps -test -f '{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}' "./$pkg" | sed "s|^$PWD/\{0,1\}||" | grep -v '^$')
  fi
  [ "${dep_changed[$pkg]}" = yes ]
}

run_one() {
  local pkg=$1 file=$2 test=$3 env=$4 from=$5 to=$6 why=$7 hits log rc t0
  [ -n "$pkg" ] && [ -n "$file" ] && [ -n "$test" ] && [ -n "$from" ] && [ -n "$to" ] ||
    die "an entry near '$from' lacks one of pkg, file, test, from, to"
  selected "$pkg" || return 0
  # HANDMUTANTS_SHARD=K/N: the Kth of N parts of the list (every Nth
  # block), so that N copies run side by side (CI runs two).
  seen=$((seen + 1))
  [ $(((seen - 1) % shard_n)) = $((shard_k - 1)) ] || return 0
  if [ -n "$since" ] && [ -n "${old_block["$pkg|$file|$test|$env|$from|$to"]:-}" ] && ! moved "$pkg"; then
    unchanged=$((unchanged + 1))
    return 0
  fi
  n=$((n + 1))
  if [ -n "${HANDMUTANTS_DRY:-}" ]; then
    # The entry's line must be there in the dry run too: a line that moved
    # to another file fails the real run, in CI, after minutes of others.
    [ -f "$file" ] || die "$file: no such file (entry '$from')"
    hits=$(F="$from" awk 'index($0, ENVIRON["F"]) { n++ } END { print n + 0 }' "$file")
    [ "$hits" = 1 ] || die "$file: '$from' is on $hits lines, want exactly one: make the entry name one line"
    printf '   would run  %-28s %s\n' "$file" "$to"
    return 0
  fi
  local src=$OUT/tree/$file
  [ -f "$src" ] || die "$file: no such file (entry '$from')"
  hits=$(F="$from" awk 'index($0, ENVIRON["F"]) { n++ } END { print n + 0 }' "$src")
  [ "$hits" = 1 ] || die "$file: '$from' is on $hits lines, want exactly one: make the entry name one line"
  # The test must pass on the unchanged tree (once per test command).
  local key="$pkg|$test|$env"
  if [ -z "${baseline[$key]:-}" ]; then
    log=$OUT/baseline-$n.log
    if ! (cd "$OUT/tree" && env $env go test -v -count=1 -run "$test" "./$pkg" > "$log" 2>&1); then
      tail -20 "$log" >&2
      die "the test of '$from' ($pkg -run '$test') fails without the mutant: fix that first (log: $log)"
    fi
    grep -q "no tests to run" "$log" && die "$pkg -run '$test' runs no test: correct the entry of '$from'"
    grep -q -- '--- SKIP' "$log" && echo "   note: $pkg -run '$test' skips some tests here (servers down?): see $log"
    baseline[$key]=1
  fi
  cp "$src" "$OUT/orig"
  F="$from" T="$to" awk '{ i = index($0, ENVIRON["F"]); if (i) { $0 = substr($0, 1, i - 1) ENVIRON["T"] substr($0, i + length(ENVIRON["F"])) } print }' \
    "$OUT/orig" > "$src"
  log=$OUT/mutant-$n.log
  t0=$SECONDS
  # -vet=off: go test's vet checks are not what kills a mutant (a vet
  # complaint would count as a kill the test never made), and they cost
  # each mutant a pass over its package.
  rc=0
  (cd "$OUT/tree" && env $env go test -vet=off -count=1 -run "$test" "./$pkg" > "$log" 2>&1) || rc=$?
  cp "$OUT/orig" "$src"
  if [ "$rc" != 0 ]; then
    killed=$((killed + 1))
    printf '   killed  %-28s %s  (%ds)\n' "$file" "$to" $((SECONDS - t0))
  else
    lived=$((lived + 1))
    lived_list+=("$file: $from -> $to")
    printf '   LIVED   %-28s %s  (%ds)\n      %s\n' "$file" "$to" $((SECONDS - t0)) "$why"
  fi
}

pkg= file= test= env= from= to= why=
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    '#'*) continue ;;
    '')
      [ -z "$from" ] || run_one "$pkg" "$file" "$test" "$env" "$from" "$to" "$why"
      pkg= file= test= env= from= to= why= ;;
    pkg\ *) pkg=${line#pkg }; pkg=${pkg#"${pkg%%[! ]*}"} ;;
    file\ *) file=${line#file }; file=${file#"${file%%[! ]*}"} ;;
    test\ *) test=${line#test }; test=${test#"${test%%[! ]*}"} ;;
    env\ *) env=${line#env }; env=${env#"${env%%[! ]*}"} ;;
    from\ *) from=${line#from }; from=${from#"${from%%[! ]*}"} ;;
    to\ *) to=${line#to }; to=${to#"${to%%[! ]*}"} ;;
    why\ *) why=${line#why }; why=${why#"${why%%[! ]*}"} ;;
    *) die "$LIST: cannot read the line '$line' (want pkg, file, test, env, from, to or why)" ;;
  esac
done < "$LIST"
[ -z "$from" ] || run_one "$pkg" "$file" "$test" "$env" "$from" "$to" "$why"

echo "handmutants: $n mutant(s)${HANDMUTANTS_SHARD:+ (part $HANDMUTANTS_SHARD)}: $killed killed, $lived lived; $((SECONDS - start))s (copy in $OUT)"
if [ -n "$since" ]; then
  echo "handmutants: $unchanged more left out: each as listed at $since, and nothing changed since in the packages its test builds (killed by the CI of that landing)"
fi
if [ "$lived" -gt 0 ]; then
  printf 'handmutants: lived: %s\n' "${lived_list[@]}" >&2
  exit 1
fi
