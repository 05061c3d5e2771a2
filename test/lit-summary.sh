#!/usr/bin/env bash
# Prints lit's result as one closing line, "sbpc: N passed, M failed", and
# exits non-zero unless something passed and nothing failed.
# usage: lit-summary.sh LIT_LOG [LIT_STATUS]
log=$1
status=${2:-0}
# lit pads the labels ("  Passed     : 66") when several categories appear.
count() {
  local n
  n=$(sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" "$log" | head -1)
  echo "${n:-0}"
}
passed=$(( $(count Passed) + $(count 'Expectedly Failed') ))
failed=$(( $(count Failed) + $(count Unresolved) + $(count 'Unexpectedly Passed') + $(count 'Timed Out') ))
echo "sbpc: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
