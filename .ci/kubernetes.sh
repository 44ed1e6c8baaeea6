# shellcheck shell=bash
# Sourced by the Go builds of Kubernetes (tests/controlplane/build.sh, tests/e2e/kind-node/build.sh): the one place
# for the pinned Kubernetes and etcd versions, and the wrapper module that builds Kubernetes commands from the Go
# module proxy.
KUBERNETES_VERSION=v1.34.4 # k8s.io/kubernetes; its staging modules are published as v0.34.4
STAGING_VERSION=v0.34.4
ETCD_VERSION=v3.6.4 # go.etcd.io/etcd/server/v3, the version kubernetes v1.34.4 itself requires
# shellcheck disable=SC2034 # read by the sourcing builds
LDFLAGS="-s -w"
# What `hack/lib/version.sh` stamps into release builds, so /version and kubectl report v1.34.4.
# shellcheck disable=SC2034 # read by the sourcing builds
KUBE_VERSION_LDFLAGS="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 \
-X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=34 -X k8s.io/client-go/pkg/version.gitTreeState=clean"

# write_kubernetes_module DIR MODULE TOOL...: writes DIR/go.mod for module MODULE, which requires k8s.io/kubernetes
# (and etcd's server, so both share the exact etcd libraries kubernetes was tested with), maps each staging module
# (which kubernetes's own go.mod replaces with ./staging/src/...) to its published release, and lists TOOL packages.
write_kubernetes_module() {
  local dir=$1 module=$2 kube_mod tool
  shift 2
  kube_mod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$kube_mod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION" >&2; return 1; }
  {
    printf 'module %s\n\ngo 1.24.0\n\nrequire (\n' "$module"
    echo "	k8s.io/kubernetes $KUBERNETES_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    printf ')\n\nreplace (\n'
    sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*$#\t\1 => \1 '"$STAGING_VERSION"'#p' "$kube_mod"
    printf ')\n\ntool (\n'
    for tool in "$@"; do echo "	$tool"; done
    echo ")"
  } >"$dir/go.mod.new"
  grep -q "k8s.io/api => k8s.io/api $STAGING_VERSION" "$dir/go.mod.new" ||
    { echo "no staging replace lines found in $kube_mod" >&2; return 1; }
  mv "$dir/go.mod.new" "$dir/go.mod"
}
