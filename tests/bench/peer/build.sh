#!/usr/bin/env bash
# Builds the benchmark's peer, Kubeflow's mpi-operator, from the Go module proxy into
# ${KUBETRAIN_CACHE:-~/.cache/kubetrain}/mpi-operator-<key>/bin/mpi-operator (<key> hashes the pin); a second run exits
# at once. `go install ...@version` cannot work here (its deprecation check asks the proxy for the version list), so
# the build runs inside a wrapper module that requires the pinned version.
# `build.sh --print-root` prints the root (bin/mpi-operator; the CRD is read from the module cache by tests/bench).
set -euo pipefail

MPI_OPERATOR_VERSION=v0.8.0 # github.com/kubeflow/mpi-operator
# shellcheck source=../../../.ci/go-env.sh
. "$(dirname "$0")/../../../.ci/go-env.sh"
key=$(printf 'mpi-operator=%s' "$MPI_OPERATOR_VERSION" | sha256sum | cut -c1-12)
root="$cache/mpi-operator-$key"
if [ "${1:-}" = --print-root ]; then
  echo "$root"
  exit 0
fi
if [ -x "$root/bin/mpi-operator" ]; then
  echo "peer: mpi-operator $MPI_OPERATOR_VERSION -> $root/bin/mpi-operator"
  exit 0
fi
command -v go >/dev/null || { echo "peer: 'go' not found on PATH" >&2; exit 1; }
mkdir -p "$root/module" "$root/bin"
cd "$root/module"
log="$root/build.log"
if [ ! -f go.sum ]; then
  printf 'module kubetrain.dev/bench/peer\n\ngo 1.24.0\n\nrequire github.com/kubeflow/mpi-operator %s\n\ntool github.com/kubeflow/mpi-operator/cmd/mpi-operator\n' \
    "$MPI_OPERATOR_VERSION" >go.mod
  go mod tidy >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "peer: FAILED: go mod tidy (log $log)" >&2; exit 1; }
fi
echo "peer: building mpi-operator $MPI_OPERATOR_VERSION (about 4 minutes on 2 cores)" >&2
nice -n 10 go build -trimpath -ldflags="-s -w" -o "$root/bin/mpi-operator.new" github.com/kubeflow/mpi-operator/cmd/mpi-operator \
  >>"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "peer: FAILED: go build (log $log)" >&2; exit 1; }
mv "$root/bin/mpi-operator.new" "$root/bin/mpi-operator"
echo "peer: mpi-operator $MPI_OPERATOR_VERSION -> $root/bin/mpi-operator"
