#!/usr/bin/env bash
# Builds the pinned control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) from the Go
# module proxy into ${KUBETRAIN_CACHE:-~/.cache/kubetrain}/controlplane-<key>/bin; <key> hashes the pins below.
# Nothing is downloaded but Go modules; a second run finds every binary and exits at once.
# `build.sh --print-bin-dir` only prints that bin directory (tests/support/cluster.py uses it to find the binaries).
set -euo pipefail

# shellcheck source=../../.ci/kubernetes.sh
. "$(dirname "$0")/../../.ci/kubernetes.sh" # KUBERNETES_VERSION, ETCD_VERSION, LDFLAGS, ...
KWOK_VERSION=v0.7.0 # sigs.k8s.io/kwok, built in its own module against the Kubernetes libraries it was released with
cache=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}
pins="kubernetes=$KUBERNETES_VERSION staging=$STAGING_VERSION etcd=$ETCD_VERSION kwok=$KWOK_VERSION ldflags=$LDFLAGS $KUBE_VERSION_LDFLAGS"
key=$(printf '%s' "$pins" | sha256sum | cut -c1-12)
root="$cache/controlplane-$key"
bin="$root/bin"
kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler)
if [ "${1:-}" = --print-bin-dir ]; then
  echo "$bin"
  exit 0
fi

report() { # prints one line per binary: name, version pin, path
  echo "controlplane: etcd $ETCD_VERSION -> $bin/etcd"
  for b in "${kube_binaries[@]}"; do echo "controlplane: $b $KUBERNETES_VERSION -> $bin/$b"; done
  echo "controlplane: kwok $KWOK_VERSION -> $bin/kwok"
}

all_built() {
  local b
  for b in etcd "${kube_binaries[@]}" kwok; do [ -x "$bin/$b" ] || return 1; done
}

if all_built; then
  report
  exit 0
fi

command -v go >/dev/null || { echo "controlplane: 'go' not found on PATH; install Go >= 1.24" >&2; exit 1; }
mkdir -p "$bin" "$cache/go"
exec 9>"$root/.lock"
flock 9 # one build at a time per key (the kind node build runs this too)
all_built && { report; exit 0; }
# shellcheck source=../../.ci/go-env.sh
. "$(dirname "$0")/../../.ci/go-env.sh"
log="$root/build.log"
: >"$log"

# shellcheck source=../../.ci/build-steps.sh
. "$(dirname "$0")/../../.ci/build-steps.sh" controlplane # run, go_in, say

# Kubernetes: a wrapper module (.ci/kubernetes.sh) with the control plane and etcd as its tools.
build_kubernetes() {
  local dir="$root/modules/kubernetes" pkgs=() b
  mkdir -p "$dir"
  if [ ! -f "$dir/go.sum" ]; then
    echo "module kubetrain.dev/controlplane/kubernetes" >"$dir/go.mod"
    run "resolving k8s.io/kubernetes@$KUBERNETES_VERSION" write_kubernetes_module "$dir" \
      kubetrain.dev/controlplane/kubernetes "${kube_binaries[@]/#/k8s.io/kubernetes/cmd/}" go.etcd.io/etcd/server/v3
    run "resolving modules for kubernetes $KUBERNETES_VERSION and etcd $ETCD_VERSION" go_in "$dir" mod tidy
  fi
  for b in "${kube_binaries[@]}"; do [ -x "$bin/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  if [ ${#pkgs[@]} -gt 0 ]; then
    mkdir -p "$root/out"
    run "building ${pkgs[*]##*/} (first build: 10-30 minutes on 2 cores)" \
      go_in "$dir" build -trimpath -ldflags="$LDFLAGS $KUBE_VERSION_LDFLAGS" -o "$root/out/" "${pkgs[@]}"
    for b in "${pkgs[@]##*/}"; do mv "$root/out/$b" "$bin/$b"; done
  fi
  if [ ! -x "$bin/etcd" ]; then
    run "building etcd $ETCD_VERSION" \
      go_in "$dir" build -trimpath -ldflags="$LDFLAGS" -o "$root/out/etcd" go.etcd.io/etcd/server/v3
    mv "$root/out/etcd" "$bin/etcd"
  fi
}

# kwok: its own wrapper module, so kwok keeps the dependency versions it was released with.
build_kwok() {
  local dir="$root/modules/kwok"
  [ -x "$bin/kwok" ] && return 0
  mkdir -p "$dir" "$root/out"
  if [ ! -f "$dir/go.sum" ]; then
    printf 'module kubetrain.dev/controlplane/kwok\n\ngo 1.24.0\n\nrequire sigs.k8s.io/kwok %s\n\ntool sigs.k8s.io/kwok/cmd/kwok\n' \
      "$KWOK_VERSION" >"$dir/go.mod"
    run "resolving modules for kwok $KWOK_VERSION" go_in "$dir" mod tidy
  fi
  run "building kwok $KWOK_VERSION" \
    go_in "$dir" build -trimpath -ldflags="$LDFLAGS" -o "$root/out/kwok" sigs.k8s.io/kwok/cmd/kwok
  mv "$root/out/kwok" "$bin/kwok"
}

build_kwok
build_kubernetes
all_built || { echo "controlplane: some binaries are missing in $bin after the build" >&2; exit 1; }
report
