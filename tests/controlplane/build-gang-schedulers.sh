#!/usr/bin/env bash
# Builds the two gang schedulers of the control-plane tier from the Go module proxy into
# ${KUBETRAIN_CACHE:-~/.cache/kubetrain}/gangschedulers-<key>/bin, and copies the CRDs they need from the modules (at
# build time, never into the repository) into gangschedulers-<key>/crds; <key> hashes the pins below.
#   scheduler-plugins  sigs.k8s.io/scheduler-plugins' kube-scheduler with the Coscheduling plugin; built against the
#                      Kubernetes libraries of its release (k8s.io/kubernetes v1.33.5, staging v0.33.5), one minor
#                      version behind our v1.34 kube-apiserver, which Kubernetes' version-skew policy allows.
#   scheduler-plugins-controller
#                      its controller, from the same module: it keeps each PodGroup's status (phase, running,
#                      succeeded), and that update is the event on which the scheduler retries a gang it turned away
#                      (Coscheduling requeues on Pod adds and PodGroup changes only), e.g. when another gang finishes.
#   vc-scheduler       Volcano's scheduler, built against the libraries of its release (k8s.io/kubernetes v1.30.2,
#                      staging v0.30.2); it creates its `default` Queue itself and moves PodGroups Pending -> Inqueue
#                      -> Running, so Volcano's controller-manager (PodGroups for bare pods, Queue status, Jobs) is
#                      not needed for PodGroups that the test or the operator creates.
# Each wrapper module copies the `replace` lines of the module it builds: Go ignores a dependency's replace lines, and
# both pin k8s.io/kubernetes's staging modules (required there as v0.0.0) to published releases that way.
# Nothing is downloaded but Go modules; a second run finds every file and exits at once.
# `build-gang-schedulers.sh --print-bin-dir` only prints the bin directory (tests/support/cluster.py uses it).
set -euo pipefail

SCHEDULER_PLUGINS_VERSION=v0.33.5            # sigs.k8s.io/scheduler-plugins
SCHEDULER_PLUGINS_KUBERNETES_VERSION=v1.33.5 # the k8s.io/kubernetes its go.mod requires (checked at build time)
VOLCANO_VERSION=v1.10.0                      # volcano.sh/volcano
LDFLAGS="-s -w"
cache=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}
pins="scheduler-plugins=$SCHEDULER_PLUGINS_VERSION/$SCHEDULER_PLUGINS_KUBERNETES_VERSION volcano=$VOLCANO_VERSION ldflags=$LDFLAGS"
key=$(printf '%s' "$pins" | sha256sum | cut -c1-12)
root="$cache/gangschedulers-$key"
bin="$root/bin"
crds="$root/crds"
binaries=(scheduler-plugins scheduler-plugins-controller vc-scheduler)
crd_files=(scheduling.x-k8s.io_podgroups.yaml scheduling.x-k8s.io_elasticquotas.yaml
  scheduling.volcano.sh_podgroups.yaml scheduling.volcano.sh_queues.yaml)
if [ "${1:-}" = --print-bin-dir ]; then
  echo "$bin"
  exit 0
fi

report() { # prints one line per file: name, version pin, path
  echo "gangschedulers: scheduler-plugins (kube-scheduler + Coscheduling) $SCHEDULER_PLUGINS_VERSION -> $bin/scheduler-plugins"
  echo "gangschedulers: scheduler-plugins-controller $SCHEDULER_PLUGINS_VERSION -> $bin/scheduler-plugins-controller"
  echo "gangschedulers: vc-scheduler $VOLCANO_VERSION -> $bin/vc-scheduler"
  echo "gangschedulers: CRDs -> $crds/{$(IFS=,; echo "${crd_files[*]}")}"
}

all_built() {
  local f
  for f in "${binaries[@]}"; do [ -x "$bin/$f" ] || return 1; done
  for f in "${crd_files[@]}"; do [ -s "$crds/$f" ] || return 1; done
}

if all_built; then
  report
  exit 0
fi

command -v go >/dev/null || { echo "gangschedulers: 'go' not found on PATH; install Go >= 1.24" >&2; exit 1; }
mkdir -p "$bin" "$crds" "$cache/go"
exec 9>"$root/.lock"
flock 9 # one build at a time per key
all_built && { report; exit 0; }
# shellcheck source=../../.ci/go-env.sh
. "$(dirname "$0")/../../.ci/go-env.sh"
log="$root/build.log"
: >"$log"

# shellcheck source=../../.ci/build-steps.sh
. "$(dirname "$0")/../../.ci/build-steps.sh" gangschedulers # run, go_in, say

module_dir() { # module_dir MODULE VERSION: prints where `go mod download` unpacked MODULE@VERSION
  go mod download -json "$1@$2" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'
}

# write_wrapper_module DIR MODULE DEPENDENCY VERSION TOOL...: writes DIR/go.mod for MODULE, which requires
# DEPENDENCY@VERSION, repeats every `replace` line of DEPENDENCY's go.mod and lists the TOOLs; DIR/go.sum starts as
# DEPENDENCY's go.sum (the checksums its release was built with, so `go mod tidy` asks the checksum database for few).
write_wrapper_module() {
  local dir=$1 module=$2 dependency=$3 version=$4 source tool
  shift 4
  source=$(cd "$dir" && module_dir "$dependency" "$version")
  [ -f "$source/go.mod" ] || { echo "cannot find go.mod of $dependency@$version" >&2; return 1; }
  {
    printf 'module %s\n\ngo 1.24.0\n\nrequire %s %s\n\nreplace (\n' "$module" "$dependency" "$version"
    # Both the block form (`\tA => B v`) and single lines (`replace A => B v`).
    sed -n 's#^\(replace\)\?\s*\([^ (]\+\) => \(\S\+ \S\+\)\s*$#\t\2 => \3#p' "$source/go.mod"
    printf ')\n\ntool (\n'
    for tool in "$@"; do echo "	$tool"; done
    echo ")"
  } >"$dir/go.mod.new"
  grep -q "k8s.io/api => k8s.io/api " "$dir/go.mod.new" || { echo "no replace lines found in $source/go.mod" >&2; return 1; }
  cp "$source/go.sum" "$dir/go.sum.new"
  chmod 0644 "$dir/go.sum.new"
  mv "$dir/go.mod.new" "$dir/go.mod"
  mv "$dir/go.sum.new" "$dir/go.sum"
}

# resolve_module NAME MODULE VERSION PACKAGE...: the wrapper module modules/NAME for MODULE@VERSION, its tools the
# PACKAGEs.
resolve_module() {
  local name=$1 module=$2 version=$3 dir="$root/modules/$1"
  shift 3
  [ -f "$dir/.resolved" ] && return 0
  mkdir -p "$dir"
  echo "module kubetrain.dev/controlplane/$name" >"$dir/go.mod"
  rm -f "$dir/go.sum"
  run "resolving $module@$version" write_wrapper_module "$dir" "kubetrain.dev/controlplane/$name" \
    "$module" "$version" "$@"
  run "resolving modules for $module $version" go_in "$dir" mod tidy
  touch "$dir/.resolved"
}

# build_tool MODULE_NAME BINARY PACKAGE LDFLAGS: PACKAGE of the wrapper module modules/MODULE_NAME as bin/BINARY.
build_tool() {
  local dir="$root/modules/$1" binary=$2 package=$3 ldflags=$4
  [ -x "$bin/$binary" ] && return 0
  mkdir -p "$root/out"
  run "building $binary (first build: 10-15 minutes on 2 cores)" \
    go_in "$dir" build -trimpath -ldflags="$ldflags" -o "$root/out/$binary" "$package"
  mv "$root/out/$binary" "$bin/$binary"
}

copy_crd() { # copy_crd MODULE VERSION PATH: the CRD at PATH inside MODULE@VERSION into crds/
  local source
  source=$(cd "$root/modules" && module_dir "$1" "$2")
  [ -s "$source/$3" ] || { echo "gangschedulers: $3 not found in $1@$2 ($source)" >&2; exit 1; }
  cp "$source/$3" "$crds/${3##*/}.new"
  chmod 0644 "$crds/${3##*/}.new"
  mv "$crds/${3##*/}.new" "$crds/${3##*/}"
}

kubernetes_of_scheduler_plugins() { # the wrapper module pins the k8s.io/kubernetes that the stamp below names
  grep -q "k8s.io/kubernetes => k8s.io/kubernetes $SCHEDULER_PLUGINS_KUBERNETES_VERSION\$" \
    "$root/modules/scheduler-plugins/go.mod" || {
    echo "gangschedulers: scheduler-plugins $SCHEDULER_PLUGINS_VERSION does not build against k8s.io/kubernetes" \
      "$SCHEDULER_PLUGINS_KUBERNETES_VERSION; see $root/modules/scheduler-plugins/go.mod" >&2
    exit 1
  }
}

resolve_module scheduler-plugins sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION" \
  sigs.k8s.io/scheduler-plugins/cmd/scheduler sigs.k8s.io/scheduler-plugins/cmd/controller
kubernetes_of_scheduler_plugins
# Stamped with the kube-scheduler release it is built from: component-base checks its emulation version against the
# binary's, and refuses to start when stamped v0.33.5 (scheduler-plugins' own number) as 0.33 is not within [1.31, 1.33].
build_tool scheduler-plugins scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler \
  "$LDFLAGS -X k8s.io/component-base/version.gitVersion=$SCHEDULER_PLUGINS_KUBERNETES_VERSION"
build_tool scheduler-plugins scheduler-plugins-controller sigs.k8s.io/scheduler-plugins/cmd/controller \
  "$LDFLAGS -X k8s.io/component-base/version.gitVersion=$SCHEDULER_PLUGINS_KUBERNETES_VERSION"
# The controller also reconciles ElasticQuotas and does not start without their CRD.
copy_crd sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION" config/crd/bases/scheduling.x-k8s.io_podgroups.yaml
copy_crd sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION" config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml

resolve_module vc-scheduler volcano.sh/volcano "$VOLCANO_VERSION" volcano.sh/volcano/cmd/scheduler
build_tool vc-scheduler vc-scheduler volcano.sh/volcano/cmd/scheduler \
  "$LDFLAGS -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION"
copy_crd volcano.sh/volcano "$VOLCANO_VERSION" config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml
copy_crd volcano.sh/volcano "$VOLCANO_VERSION" config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml

all_built || { echo "gangschedulers: some files are missing in $root after the build" >&2; exit 1; }
report
