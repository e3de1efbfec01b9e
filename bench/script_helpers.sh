# bench/script_helpers.sh — sourced by the benchmark scripts: their error
# exit and argument check.

# die MESSAGE...: "SCRIPT: error: MESSAGE" on stderr, exit code 2.
die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 2
}

# need_count FLAG VALUE MIN: dies unless VALUE is an integer >= MIN.
need_count() {
  if ! [[ "$2" =~ ^[0-9]{1,9}$ ]] || (( 10#$2 < $3 )); then
    die "$1: '$2' is not an integer >= $3"
  fi
}
