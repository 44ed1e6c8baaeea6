#!/usr/bin/env bash
# A local image registry for a kind cluster, as kind's documentation sets one up: a registry container that the host
# reaches at localhost:5001 and the nodes reach at kind-registry:5000 on the `kind` Docker network. Every node's
# containerd is told that localhost:5001/... images come from there (cluster.yaml turns those settings on).
# Run it after `kind create cluster`; run it again after adding nodes. The registry outlives the cluster:
# `docker rm -f kind-registry` removes it.
# Usage: examples/kind/registry.sh [CLUSTER]   (default: $KIND_CLUSTER_NAME, else kind's default, "kind")
# Environment: REGISTRY_IMAGE (default registry:2); REGISTRY_DATA, a folder of this machine that keeps the pushed
# images when the container is removed (default: none, they go with it); KIND, DOCKER (the binaries).
set -euo pipefail
cluster=${1:-${KIND_CLUSTER_NAME:-kind}}
image=${REGISTRY_IMAGE:-registry:2}
KIND=${KIND:-kind}
DOCKER=${DOCKER:-docker}
name=kind-registry
port=5001

volume=()
if [ -n "${REGISTRY_DATA:-}" ]; then
  mkdir -p "$REGISTRY_DATA"
  volume=(--volume "$(cd "$REGISTRY_DATA" && pwd):/var/lib/registry")
fi
if [ "$("$DOCKER" inspect --format '{{.State.Running}}' "$name" 2>/dev/null || true)" != true ]; then
  "$DOCKER" rm -f "$name" >/dev/null 2>&1 || true
  "$DOCKER" run --detach --restart=always --publish "127.0.0.1:$port:5000" --network bridge --name "$name" \
    "${volume[@]}" "$image" >/dev/null
fi
if [ "$("$DOCKER" inspect --format '{{json .NetworkSettings.Networks.kind}}' "$name")" = null ]; then
  "$DOCKER" network connect kind "$name"
fi
for node in $("$KIND" get nodes --name "$cluster"); do
  "$DOCKER" exec "$node" mkdir -p "/etc/containerd/certs.d/localhost:$port"
  printf '[host."http://%s:5000"]\n' "$name" |
    "$DOCKER" exec -i "$node" cp /dev/stdin "/etc/containerd/certs.d/localhost:$port/hosts.toml"
done
echo "registry: localhost:$port (pushed from this machine) is what the nodes of $cluster pull"
