#!/usr/bin/env bash
# Builds kind and a kind node image from pinned versions with nothing pulled from a registry or git remote, the way
# `kind build node-image` assembles one: kind, kubelet, kubeadm, kubectl, kube-proxy and CoreDNS from the Go module
# proxy (cached in ${KUBETRAIN_CACHE:-~/.cache/kubetrain}/kind-node-<key>), the control plane and etcd from
# tests/controlplane/build.sh, pause from its C source in the Kubernetes module; then the images kubeadm lists, under
# the exact names it lists, the kind base image (./Dockerfile), and the node image: the base started, the binaries
# copied in, every image imported into its containerd, committed as kubetrain/kind-node:<kubernetes version>.
# A second run finds the binaries and the image (labelled with the key) and exits at once.
# Usage: build.sh               build (if needed), then print what was built
#        build.sh --print-env   only print the kind tests' settings for this image (KIND=..., ...;
#                               tests/support/kind_cluster.py reads them)
# Not in the image, because the Go module proxy here does not serve them: kindnetd (kind's default CNI; clusters of
# this image set disableDefaultCNI and get the plain CNI of ./cni.sh), crictl (sigs.k8s.io/cri-tools; neither kubeadm
# nor our tests need it), the local-path provisioner (our tests use PersistentVolumes on a directory every node mounts).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
# shellcheck source=../../../.ci/kubernetes.sh
. "$repo/.ci/kubernetes.sh"
KIND_VERSION=v0.30.0       # sigs.k8s.io/kind
COREDNS_VERSION=v1.12.1    # github.com/coredns/coredns: the CoreDNS kubeadm v1.34 deploys
NODE_ETCD_VERSION=v3.6.5   # go.etcd.io/etcd/server/v3: the etcd kubeadm v1.34.4 deploys (its libraries use v3.6.4)
PAUSE_VERSIONS=(3.10.1 3.10) # kubeadm's pause, and the sandbox image of kind's containerd config

cache=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}
pins="kind=$KIND_VERSION kubernetes=$KUBERNETES_VERSION staging=$STAGING_VERSION"
pins+=" coredns=$COREDNS_VERSION etcd=$NODE_ETCD_VERSION ldflags=$LDFLAGS $KUBE_VERSION_LDFLAGS"
key=$(printf '%s' "$pins" | sha256sum | cut -c1-12)
root="$cache/kind-node-$key"
bin="$root/bin"
# The image also depends on how it is assembled: this script, the Dockerfile, kube-proxy's wrapper, the control plane.
image_key=$( (echo "$pins ${PAUSE_VERSIONS[*]}"; cat "$here/build.sh" "$here/Dockerfile" "$here/kube-proxy" \
  "$repo/.ci/runc-wrapper/main.go"; "$repo/tests/controlplane/build.sh" --print-bin-dir) | sha256sum | cut -c1-12)
NODE_IMAGE=kubetrain/kind-node:$KUBERNETES_VERSION
BASE_IMAGE=kubetrain/kind-base:$key

if [ "${1:-}" = --print-env ]; then
  echo "KIND=$bin/kind"
  echo "KUBETRAIN_KIND_NODE_IMAGE=$NODE_IMAGE"
  echo "KUBETRAIN_KIND_CNI=plain"
  exit 0
fi

log="$root/build.log"
mkdir -p "$bin" "$root/out"
exec 9>"$root/.lock"
flock 9 # one build at a time per key
: >"$log"
# shellcheck source=../../../.ci/build-steps.sh
. "$repo/.ci/build-steps.sh" kind-node # run, go_in, say

# go_tool NAME MODULE VERSION PACKAGE: builds PACKAGE into $bin/NAME in a wrapper module that requires MODULE@VERSION.
go_tool() {
  local name=$1 module=$2 version=$3 package=$4 dir="$root/modules/$1"
  [ -x "$bin/$name" ] && return 0
  mkdir -p "$dir"
  if [ ! -f "$dir/go.sum" ]; then
    printf 'module kubetrain.dev/kind-node/%s\n\ngo 1.24.0\n\nrequire %s %s\n\ntool %s\n' \
      "$name" "$module" "$version" "$package" >"$dir/go.mod"
    run "resolving modules for $module $version" go_in "$dir" mod tidy
  fi
  run "building $name ($module $version)" go_in "$dir" build -trimpath -ldflags="$LDFLAGS" -o "$root/out/$name" "$package"
  mv "$root/out/$name" "$bin/$name"
}

build_kubernetes() { # kubelet, kubeadm, kubectl, kube-proxy and pause, from the pinned k8s.io/kubernetes
  local dir="$root/modules/kubernetes" pkgs=() b kube_dir
  local tools=(kubelet kubeadm kubectl kube-proxy)
  mkdir -p "$dir"
  if [ ! -f "$dir/go.sum" ]; then
    echo "module kubetrain.dev/kind-node/kubernetes" >"$dir/go.mod"
    run "resolving k8s.io/kubernetes@$KUBERNETES_VERSION" write_kubernetes_module "$dir" \
      kubetrain.dev/kind-node/kubernetes "${tools[@]/#/k8s.io/kubernetes/cmd/}"
    run "resolving modules for kubernetes $KUBERNETES_VERSION" go_in "$dir" mod tidy
  fi
  for b in "${tools[@]}"; do [ -x "$bin/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  if [ ${#pkgs[@]} -gt 0 ]; then
    run "building ${pkgs[*]##*/} (first build: 10-20 minutes on 2 cores)" \
      go_in "$dir" build -trimpath -ldflags="$LDFLAGS $KUBE_VERSION_LDFLAGS" -o "$root/out/" "${pkgs[@]}"
    for b in "${pkgs[@]##*/}"; do mv "$root/out/$b" "$bin/$b"; done
  fi
  if [ ! -x "$bin/pause" ]; then
    kube_dir=$(go_in "$dir" list -m -f '{{.Dir}}' k8s.io/kubernetes)
    run "building pause ${PAUSE_VERSIONS[0]} from $kube_dir/build/pause/linux/pause.c" \
      gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_VERSIONS[0]}" -o "$bin/pause" "$kube_dir/build/pause/linux/pause.c"
  fi
}

binaries_built() {
  local b
  for b in kind coredns etcd kubelet kubeadm kubectl kube-proxy pause; do [ -x "$bin/$b" ] || return 1; done
}

build_binaries() {
  command -v go >/dev/null || { say "'go' not found on PATH; install Go >= 1.24"; exit 1; }
  # shellcheck source=../../../.ci/go-env.sh
  . "$repo/.ci/go-env.sh"
  go_tool kind sigs.k8s.io/kind "$KIND_VERSION" sigs.k8s.io/kind
  go_tool coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns
  go_tool etcd go.etcd.io/etcd/server/v3 "$NODE_ETCD_VERSION" go.etcd.io/etcd/server/v3
  build_kubernetes
}

# image NAME FROM FILE...: a docker image NAME holding FILEs in /usr/local/bin, FROM an image ("scratch": /FILE).
image() {
  local name=$1 from=$2 context
  shift 2
  context=$(mktemp -d -p "$root" image.XXXXXX)
  cp "$@" "$context/"
  {
    echo "FROM $from"
    if [ "$from" = scratch ]; then
      echo "COPY . /"
      echo "ENTRYPOINT [\"/$(basename "$1")\"]"
    else
      echo "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
      [[ "$name" == *kube-proxy:* ]] && echo "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get" \
        "install -y -qq --no-install-recommends iptables conntrack >/dev/null && rm -rf /var/lib/apt/lists/*"
      echo "COPY . /usr/local/bin/"
      [[ "$name" == *coredns* ]] && echo "ENTRYPOINT [\"/usr/local/bin/coredns\"]"
    fi
    echo "LABEL kubetrain.dev/kind-node=$image_key"
  } >"$context/Dockerfile"
  run "image $name" docker build --quiet --tag "$name" "$context"
  rm -rf "$context"
}

# The images `kubeadm config images list` names (each checked against what we build) and the second pause tag.
build_component_images() {
  local controlplane name repository tag images=()
  controlplane=$("$repo/tests/controlplane/build.sh" --print-bin-dir)
  mapfile -t images < <("$bin/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION")
  for name in "${images[@]}"; do
    repository=${name%:*}
    tag=${name##*:}
    case "$repository" in
      */kube-apiserver | */kube-controller-manager | */kube-scheduler)
        [ "$tag" = "$KUBERNETES_VERSION" ] || { say "kubeadm wants $name, not $KUBERNETES_VERSION"; exit 1; }
        image "$name" debian:bookworm-slim "$controlplane/${repository##*/}" ;;
      */kube-proxy)
        cp "$bin/kube-proxy" "$root/out/kube-proxy.bin"
        image "$name" debian:bookworm-slim "$root/out/kube-proxy.bin" "$here/kube-proxy" ;;
      */etcd)
        [ "${tag%-*}" = "${NODE_ETCD_VERSION#v}" ] || { say "kubeadm wants $name: set NODE_ETCD_VERSION"; exit 1; }
        image "$name" debian:bookworm-slim "$bin/etcd" ;;
      */coredns)
        [ "$tag" = "$COREDNS_VERSION" ] || { say "kubeadm wants $name: set COREDNS_VERSION=$tag"; exit 1; }
        image "$name" debian:bookworm-slim "$bin/coredns" ;;
      */pause)
        [ "$tag" = "${PAUSE_VERSIONS[0]}" ] || { say "kubeadm wants $name: set PAUSE_VERSIONS"; exit 1; }
        image "$name" scratch "$bin/pause"
        docker tag "$name" "$repository:${PAUSE_VERSIONS[1]}"
        images+=("$repository:${PAUSE_VERSIONS[1]}") ;;
      *) say "kubeadm lists $name, which this script does not build"; exit 1 ;;
    esac
  done
  printf '%s\n' "${images[@]}" >"$root/images.txt"
}

build_base_image() {
  local context="$root/base-context" kind_dir
  kind_dir=$(cd "$root/modules/kind" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
  rm -rf "$context"
  mkdir -p "$context/bin"
  cp -r "$kind_dir/images/base/files" "$context/files"
  chmod -R u+w "$context"
  cp "$("$repo/.ci/build-runc-wrapper")" "$context/bin/kubetrain-runc"
  cp "$here/Dockerfile" "$context/Dockerfile"
  run "kind base image $BASE_IMAGE (Debian's systemd, containerd, runc, CNI plugins)" \
    docker build --quiet --label "kubetrain.dev/kind-node=$image_key" --tag "$BASE_IMAGE" "$context"
}

# As `kind build node-image` does: binaries into /usr/bin, /kind/version, images imported into the node's
# containerd (pinned, not unpacked), then `docker commit` with kind's entrypoint.
build_node_image() {
  local container="kubetrain-kind-build-$$" b
  docker rm -f "$container" >/dev/null 2>&1 || true
  run "starting a build container of $BASE_IMAGE" docker run -d --name "$container" --entrypoint=sleep \
    --security-opt seccomp=unconfined "$BASE_IMAGE" infinity
  trap 'docker rm -f "$container" >/dev/null 2>&1 || true' EXIT
  for b in kubeadm kubelet kubectl; do run "copying $b" docker cp "$bin/$b" "$container:/usr/bin/$b"; done
  docker exec "$container" bash -c "mkdir -p /kind && echo $KUBERNETES_VERSION >/kind/version"
  docker exec "$container" bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &'
  # shellcheck disable=SC2016 # expanded by bash inside the container
  run "waiting for the node's containerd" docker exec "$container" bash -c \
    'for i in $(seq 30); do [ -S /run/containerd/containerd.sock ] && ctr version && exit 0; sleep 1; done; exit 1'
  # shellcheck disable=SC2046
  run "importing $(wc -l <"$root/images.txt") images into the node's containerd" bash -c \
    "docker save $(tr '\n' ' ' <"$root/images.txt") | docker exec -i $container ctr --namespace=k8s.io images import \
     --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests -"
  docker exec "$container" ctr --namespace=k8s.io images list -q >"$root/imported.txt"
  while read -r b; do
    grep -qx "$b" "$root/imported.txt" || grep -qx "docker.io/$b" "$root/imported.txt" ||
      { say "image $b is missing in the node's containerd (it has: $(tr '\n' ' ' <"$root/imported.txt"))"; exit 1; }
  done <"$root/images.txt"
  docker exec "$container" pkill containerd || true
  run "committing $NODE_IMAGE" docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change "LABEL kubetrain.dev/kind-node=$image_key" "$container" "$NODE_IMAGE"
  docker rm -f "$container" >/dev/null
  trap - EXIT
}

label=$(docker image inspect --format '{{index .Config.Labels "kubetrain.dev/kind-node"}}' "$NODE_IMAGE" 2>/dev/null || true)
if ! binaries_built || [ "$label" != "$image_key" ]; then
  build_binaries
  binaries_built || { say "some binaries are missing in $bin after the build"; exit 1; }
  "$repo/.ci/docker-engine"
  "$repo/.ci/base-images" debian:bookworm-slim
  "$repo/tests/controlplane/build.sh" >/dev/null
  build_component_images
  build_base_image
  build_node_image
fi
mkdir -p "$cache/bin"
ln -sfn "$bin/kind" "$cache/bin/kind"
say "kind $KIND_VERSION -> $bin/kind (linked from $cache/bin/kind)"
say "node image $NODE_IMAGE ($("$bin/kind" version | cut -d' ' -f2), Kubernetes $KUBERNETES_VERSION," \
  "$(docker image inspect --format '{{.Size}}' "$NODE_IMAGE" | numfmt --to=si --suffix=B))"
