#!/usr/bin/env bash
# Builds Kueue (sigs.k8s.io/kueue, the job-queueing controller) for the control-plane tier from the Go module proxy
# into ${KUBETRAIN_CACHE:-~/.cache/kubetrain}/kueue-<key>/bin, and copies from the module (at build time, never into
# the repository) its CRDs into kueue-<key>/crds and its webhook configurations into kueue-<key>/webhooks; <key>
# hashes the pins below.
#   kueue     cmd/kueue, the controller manager with its webhooks; built against the Kubernetes libraries of its
#             release (v0.31), which the version-skew policy of client libraries allows against our v1.34 API server.
#   crds      every CRD of config/components/crd/bases: Kueue waits for each of its kinds at start.
#   webhooks  config/components/webhook/{manifests,kustomization}.yaml: the configurations and the kustomize patches
#             that add their namespace selectors (tests/support/kueue_harness.py applies both).
# The wrapper module copies the `replace` lines of Kueue's go.mod (none in v0.10.0): Go ignores a dependency's own.
# Nothing is downloaded but Go modules; a second run finds every file and exits at once.
# `build-kueue.sh --print-bin-dir` only prints the bin directory (tests/support/kueue_harness.py uses it).
set -euo pipefail

KUEUE_VERSION=v0.10.0 # sigs.k8s.io/kueue
LDFLAGS="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
cache=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}
pins="kueue=$KUEUE_VERSION ldflags=$LDFLAGS"
key=$(printf '%s' "$pins" | sha256sum | cut -c1-12)
root="$cache/kueue-$key"
bin="$root/bin"
crds="$root/crds"
webhooks="$root/webhooks"
crd_files=(admissionchecks clusterqueues cohorts localqueues multikueueclusters multikueueconfigs
  provisioningrequestconfigs resourceflavors topologies workloadpriorityclasses workloads)
crd_files=("${crd_files[@]/#/kueue.x-k8s.io_}")
crd_files=("${crd_files[@]/%/.yaml}")
webhook_files=(manifests.yaml kustomization.yaml)
if [ "${1:-}" = --print-bin-dir ]; then
  echo "$bin"
  exit 0
fi

report() { # prints one line per kind of file: name, version pin, path
  echo "kueue: kueue $KUEUE_VERSION -> $bin/kueue"
  echo "kueue: CRDs -> $crds/ (${#crd_files[@]} files)"
  echo "kueue: webhook configurations -> $webhooks/{$(IFS=,; echo "${webhook_files[*]}")}"
}

all_built() {
  local f
  [ -x "$bin/kueue" ] || return 1
  for f in "${crd_files[@]}"; do [ -s "$crds/$f" ] || return 1; done
  for f in "${webhook_files[@]}"; do [ -s "$webhooks/$f" ] || return 1; done
}

if all_built; then
  report
  exit 0
fi

command -v go >/dev/null || { echo "kueue: 'go' not found on PATH; install Go >= 1.24" >&2; exit 1; }
mkdir -p "$bin" "$crds" "$webhooks" "$cache/go"
exec 9>"$root/.lock"
flock 9 # one build at a time per key
all_built && { report; exit 0; }
# shellcheck source=../../.ci/go-env.sh
. "$(dirname "$0")/../../.ci/go-env.sh"
log="$root/build.log"
: >"$log"

# shellcheck source=../../.ci/build-steps.sh
. "$(dirname "$0")/../../.ci/build-steps.sh" kueue # run, go_in, say

module="$root/module"

module_dir() { # module_dir MODULE VERSION: prints where `go mod download` unpacked MODULE@VERSION
  go mod download -json "$1@$2" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'
}

# write_wrapper_module: writes $module/go.mod, which requires Kueue, repeats every `replace` line of Kueue's go.mod and
# lists cmd/kueue as its tool; $module/go.sum starts as Kueue's go.sum (so `go mod tidy` asks the checksum database
# for few).
write_wrapper_module() {
  local source
  source=$(cd "$module" && module_dir sigs.k8s.io/kueue "$KUEUE_VERSION")
  [ -f "$source/go.mod" ] || { echo "cannot find go.mod of sigs.k8s.io/kueue@$KUEUE_VERSION" >&2; return 1; }
  {
    printf 'module kubetrain.dev/controlplane/kueue\n\ngo 1.24.0\n\nrequire sigs.k8s.io/kueue %s\n\nreplace (\n' \
      "$KUEUE_VERSION"
    # Both the block form (`\tA => B v`) and single lines (`replace A => B v`).
    sed -n 's#^\(replace\)\?\s*\([^ (]\+\) => \(\S\+ \S\+\)\s*$#\t\2 => \3#p' "$source/go.mod"
    printf ')\n\ntool sigs.k8s.io/kueue/cmd/kueue\n'
  } >"$module/go.mod.new"
  cp "$source/go.sum" "$module/go.sum.new"
  chmod 0644 "$module/go.sum.new"
  mv "$module/go.mod.new" "$module/go.mod"
  mv "$module/go.sum.new" "$module/go.sum"
}

resolve_module() { # the wrapper module in $module, resolved once
  [ -f "$module/.resolved" ] && return 0
  mkdir -p "$module"
  echo "module kubetrain.dev/controlplane/kueue" >"$module/go.mod"
  rm -f "$module/go.sum"
  run "resolving sigs.k8s.io/kueue@$KUEUE_VERSION" write_wrapper_module
  run "resolving modules for sigs.k8s.io/kueue $KUEUE_VERSION" go_in "$module" mod tidy
  touch "$module/.resolved"
}

build_kueue() {
  [ -x "$bin/kueue" ] && return 0
  mkdir -p "$root/out"
  run "building kueue (first build: 10-20 minutes on 2 cores)" \
    go_in "$module" build -trimpath -ldflags="$LDFLAGS" -o "$root/out/kueue" sigs.k8s.io/kueue/cmd/kueue
  mv "$root/out/kueue" "$bin/kueue"
}

copy_file() { # copy_file PATH DIRECTORY: the file at PATH inside Kueue's module into DIRECTORY
  local source
  source=$(cd "$module" && module_dir sigs.k8s.io/kueue "$KUEUE_VERSION")
  [ -s "$source/$1" ] || { echo "kueue: $1 not found in sigs.k8s.io/kueue@$KUEUE_VERSION ($source)" >&2; exit 1; }
  cp "$source/$1" "$2/${1##*/}.new"
  chmod 0644 "$2/${1##*/}.new"
  mv "$2/${1##*/}.new" "$2/${1##*/}"
}

resolve_module
build_kueue
for f in "${crd_files[@]}"; do copy_file "config/components/crd/bases/$f" "$crds"; done
for f in "${webhook_files[@]}"; do copy_file "config/components/webhook/$f" "$webhooks"; done

all_built || { echo "kueue: some files are missing in $root after the build" >&2; exit 1; }
report
