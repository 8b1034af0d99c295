#!/bin/sh
# Every test: Zig unit tests, format/lint/type checks, then the TypeScript tests
# (which also run the CLI under Bun). Run through `./dotllm task test`, which puts
# the pinned deno, bun and zig on PATH and builds the library first.
set -eu
export NO_COLOR=1
cd "$(dirname "$0")/.."

echo "== zig build test"
zig build test --summary new

echo "== deno fmt --check / lint / check"
deno fmt --check
deno lint
deno check --quiet .

echo "== deno test (with the runnable JSDoc examples of mod.ts and src/llm/)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
deno test --allow-all --no-prompt --doc mod.ts src/llm/ tests/ 2>&1 | tee "$log" || status=$?
# deno test never exits 0 with failures, but the pipe hides its status in sh.
summary=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$log" | tail -n 1 || true)
passed=$(printf '%s' "$summary" | sed -n 's/.*| \([0-9]*\) passed.*/\1/p')
failed=$(printf '%s' "$summary" | sed -n 's/.*| \([0-9]*\) failed.*/\1/p')
echo "tests: ${passed:-0} passed, ${failed:-0} failed"
case "$summary" in ok*) [ "${passed:-0}" -gt 0 ] || exit 1 ;; *) exit 1 ;; esac

# Every test file of tests/test_files.txt ran at least one test, and no other
# test file exists: a file renamed out of the *_test.ts pattern, deleted, or
# left with no tests fails here instead of silently dropping out.
ran=$(sed -n 's/^running \([1-9][0-9]*\) tests\{0,1\} from \.\/\(tests\/[^ ]*_test\.ts\)$/\2/p' "$log" | sort -u)
listed=$(sort -u tests/test_files.txt)
present=$(ls tests/*_test.ts | sort -u)
if [ "$ran" != "$listed" ] || [ "$present" != "$listed" ]; then
  echo "test files: tests/test_files.txt lists, tests/ holds, and deno test ran different files:"
  printf '%s\n' "$listed" >"$log.listed"
  printf '%s\n' "$ran" | diff "$log.listed" - | sed -n 's/^</  listed, did not run:/p; s/^>/  ran, not listed:/p'
  printf '%s\n' "$present" | diff "$log.listed" - | sed -n 's/^>/  present, not listed:/p'
  rm -f "$log.listed"
  exit 1
fi
echo "test files: all $(printf '%s\n' "$listed" | wc -l | tr -d ' ') of tests/test_files.txt ran"
exit "$status"
