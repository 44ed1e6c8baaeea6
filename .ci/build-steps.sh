# shellcheck shell=bash disable=SC2154 # log: the build log, set by the sourcing build
# Sourced by the pinned builds (tests/controlplane/build.sh, tests/controlplane/build-gang-schedulers.sh,
# tests/e2e/kind-node/build.sh) as `. build-steps.sh NAME` once they have set log (their build log); NAME prefixes
# every message.
build_name=${1:?usage: . build-steps.sh NAME}
say() { echo "$build_name: $*" >&2; }

run() { # run WHAT COMMAND...: runs a step, keeping its output in the log; on failure prints the exact error and stops
  local what=$1
  shift
  say "$what"
  if ! "$@" >>"$log" 2>&1; then
    say "FAILED: $what"
    say "command: $*"
    tail -n 40 "$log" >&2
    say "full log: $log"
    exit 1
  fi
}

go_in() { # go_in DIR ARGS...: runs go inside the wrapper module DIR
  local dir=$1
  shift
  (cd "$dir" && go "$@")
}
