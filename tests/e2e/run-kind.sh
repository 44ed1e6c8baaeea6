#!/usr/bin/env bash
# The user's path on a kind cluster, end to end (the scenarios are in scenarios.sh):
#   kind cluster (1 control plane + 1 worker node, a volume directory shared by both) -> our images built with docker
#   and loaded with `kind load docker-image` -> helm install -> data + checkpoint PersistentVolumes
#   -> the scenarios: install, train, a user's own image (MPICH, launcher as a worker), restart after a lost worker,
#   an elastic job (a worker lost and replaced, kubectl scale 2 -> 3), an image that does not exist, delete, uninstall.
# On failure it prints the nodes, pods, events, DistributedTrainings and every container's log (also saved in
# $KUBETRAIN_E2E_ARTIFACTS/dump.txt).
#
# Usage: tests/e2e/run-kind.sh   (from anywhere; needs docker, kind, helm, kubectl and python with PyYAML)
# Environment (defaults):
#   KUBETRAIN_KIND_CLUSTER=kubetrain-e2e   kind cluster name (an existing cluster of that name is deleted first)
#   KUBETRAIN_KIND_NODE_IMAGE=             node image (empty: kind's default); tests/e2e/kind-node/build.sh makes one
#   KUBETRAIN_KIND_CNI=default             default: kind's own CNI (kindnetd); plain: disableDefaultCNI and
#                                          tests/e2e/kind-node/cni.sh (for node images without kindnetd)
#   KUBETRAIN_KIND_WORKERS=1               worker nodes besides the control plane (0: one node)
#   KUBETRAIN_E2E_KEEP=0                   1: keep the cluster afterwards (kubeconfig in $ARTIFACTS/kubeconfig)
#   KUBETRAIN_E2E_EPOCHS=3                 epochs cifar_mixup trains
#   KUBETRAIN_E2E_TIMEOUT=1200             seconds a training may take to succeed
#   KUBETRAIN_E2E_ARTIFACTS=<temp dir>     where the kubeconfig, rendered jobs, volumes and failure dumps go
#   KUBETRAIN_E2E_SKIP_BUILD=0             1: use kubetrain/{operator,cifar-mixup}:$TAG already in docker
#   KUBETRAIN_E2E_SCENARIOS="train own_image restart elastic missing_image delete"
#                                          the scenarios between install and uninstall, in this order
#   DOCKER, KIND, HELM, KUBECTL, PYTHON    the binaries to use
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE_BIN=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}/bin
CLUSTER=${KUBETRAIN_KIND_CLUSTER:-kubetrain-e2e}
NODE_IMAGE=${KUBETRAIN_KIND_NODE_IMAGE:-}
CNI=${KUBETRAIN_KIND_CNI:-default}
WORKER_NODES=${KUBETRAIN_KIND_WORKERS:-1}
KEEP=${KUBETRAIN_E2E_KEEP:-0}
EPOCHS=${KUBETRAIN_E2E_EPOCHS:-3}
TIMEOUT=${KUBETRAIN_E2E_TIMEOUT:-1200}
SKIP_BUILD=${KUBETRAIN_E2E_SKIP_BUILD:-0}
SCENARIOS=${KUBETRAIN_E2E_SCENARIOS:-train own_image restart elastic missing_image delete}
ARTIFACTS=${KUBETRAIN_E2E_ARTIFACTS:-$(mktemp -d -t kubetrain-e2e.XXXXXX)}
tool() { [ -x "$CACHE_BIN/$1" ] && echo "$CACHE_BIN/$1" || echo "$1"; } # .ci/setup's copy, else PATH
DOCKER=${DOCKER:-docker}
KIND=${KIND:-$(tool kind)}
HELM=${HELM:-$(tool helm)}
KUBECTL=${KUBECTL:-$(tool kubectl)}
PYTHON=${PYTHON:-$( [ -x "$REPO/.venv/bin/python" ] && echo "$REPO/.venv/bin/python" || echo python3)}
export DOCKER KIND KUBECTL

TAG=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO/charts/kubetrain/Chart.yaml")
OPERATOR_IMAGE=kubetrain/operator:$TAG
BASE_IMAGE=kubetrain/base:$TAG
ENTRYPOINTS_IMAGE=kubetrain/entrypoints:$TAG
JOB_IMAGE=kubetrain/cifar-mixup:$TAG
SYSTEM_NS=kubetrain-system
NS=kubetrain-e2e
VOLUMES=$ARTIFACTS/volumes # on the host, mounted into every node at /kubetrain-volumes
DATA_CLAIM=kubetrain-data
CHECKPOINT_CLAIM=kubetrain-checkpoints
DATA_MOUNT=/data
CHECKPOINT_MOUNT=/checkpoints

mkdir -p "$ARTIFACTS"
export KUBECONFIG=$ARTIFACTS/kubeconfig

log() { printf '[run-kind %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
kc() { "$KUBECTL" "$@"; }

dump() {
  local out=$ARTIFACTS/dump.txt
  log "dumping cluster state to $out"
  {
    echo "===== nodes"
    kc get nodes --output=wide 2>&1 || true
    kc get pods --all-namespaces --output=wide 2>&1 || true
    for ns in "$SYSTEM_NS" "$NS"; do
      echo "===== namespace $ns: objects"
      kc get distributedtrainings,pods,jobs,services,pvc --namespace "$ns" --output=wide 2>&1 || true
      echo "===== namespace $ns: events"
      kc get events --namespace "$ns" --sort-by=.lastTimestamp 2>&1 || true
      echo "===== namespace $ns: DistributedTrainings"
      kc describe distributedtrainings --namespace "$ns" 2>&1 || true
      echo "===== namespace $ns: pods"
      kc describe pods --namespace "$ns" 2>&1 || true
      for pod in $(kc get pods --namespace "$ns" --output=name 2>/dev/null); do
        for container in $(kc get "$pod" --namespace "$ns" --output=jsonpath='{.spec.containers[*].name}'); do
          echo "===== logs $ns/$pod/$container"
          kc logs "$pod" --namespace "$ns" --container "$container" --tail=300 2>&1 || true
          kc logs "$pod" --namespace "$ns" --container "$container" --previous --tail=100 2>/dev/null || true
        done
      done
    done
  } >"$out" 2>&1
  cat "$out" >&2
}

finish() {
  local code=$?
  trap - EXIT
  jobs -p | xargs -r kill 2>/dev/null || true # the phase watchers
  if [ "$code" -ne 0 ] && [ -f "$KUBECONFIG" ]; then dump; fi
  if [ "$KEEP" = 1 ]; then
    log "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG)"
  else
    "$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -rf "$VOLUMES"
  fi
  exit "$code"
}

need() {
  command -v "$1" >/dev/null 2>&1 || fail "$1 not found: $2"
}

check_tools() {
  need "$DOCKER" "install Docker"
  "$DOCKER" info >/dev/null 2>&1 || fail "docker info failed: start the Docker engine"
  need "$KIND" "install kind (https://kind.sigs.k8s.io), or build it with tests/e2e/kind-node/build.sh"
  need "$HELM" "run .ci/setup (it installs helm into $CACHE_BIN)"
  need "$KUBECTL" "run .ci/setup (it installs kubectl into $CACHE_BIN)"
  "$PYTHON" -c "import yaml" 2>/dev/null || fail "$PYTHON cannot import yaml: run .ci/setup or set PYTHON"
}

# kind's cluster config: the shared volume directory in every node; kubelet allowed on cgroup v1 hosts (it refuses
# them by default since Kubernetes 1.31; a no-op on cgroup v2).
cluster_config() {
  local node i
  node="    extraMounts: [{hostPath: $VOLUMES, containerPath: /kubetrain-volumes}]"
  echo "kind: Cluster"
  echo "apiVersion: kind.x-k8s.io/v1alpha4"
  [ "$CNI" = plain ] && printf 'networking:\n  disableDefaultCNI: true\n'
  echo "nodes:"
  printf '  - role: control-plane\n%s\n' "$node"
  for ((i = 0; i < WORKER_NODES; i++)); do printf '  - role: worker\n%s\n' "$node"; done
  printf 'kubeadmConfigPatches:\n  - |\n    kind: KubeletConfiguration\n    failCgroupV1: false\n'
}

create_cluster() {
  if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "deleting the existing kind cluster $CLUSTER"
    "$KIND" delete cluster --name "$CLUSTER"
  fi
  mkdir -p "$VOLUMES/data" "$VOLUMES/checkpoints"
  chmod 0777 "$VOLUMES/data" "$VOLUMES/checkpoints" # hostPath volumes ignore fsGroup; the images run as uid 1000
  cluster_config >"$ARTIFACTS/kind.yaml"
  local start=$SECONDS args=(--name "$CLUSTER" --kubeconfig "$KUBECONFIG" --config "$ARTIFACTS/kind.yaml")
  [ -n "$NODE_IMAGE" ] && args+=(--image "$NODE_IMAGE")
  log "creating kind cluster $CLUSTER: 1 control plane + $WORKER_NODES worker(s), image ${NODE_IMAGE:-of kind by default}"
  if [ "$CNI" = plain ]; then
    "$KIND" create cluster "${args[@]}"
    "$HERE/kind-node/cni.sh" "$CLUSTER"
  else
    "$KIND" create cluster "${args[@]}" --wait 180s
  fi
  kc wait --for=condition=Ready nodes --all --timeout=300s
  # Training pods may use every node, the control plane's too (as on a one-node cluster).
  kc taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true
  kc rollout status deployment/coredns --namespace kube-system --timeout=300s
  log "cluster ready in $((SECONDS - start)) s"
}

build_and_load_images() {
  if [ "$SKIP_BUILD" != 1 ]; then
    log "building $BASE_IMAGE (TensorFlow, OpenMPI, Horovod: slow the first time)"
    "$DOCKER" build --file "$REPO/images/base/Dockerfile" --tag "$BASE_IMAGE" "$REPO"
    log "building $OPERATOR_IMAGE, $ENTRYPOINTS_IMAGE and $JOB_IMAGE"
    "$DOCKER" build --file "$REPO/images/operator/Dockerfile" --tag "$OPERATOR_IMAGE" "$REPO"
    "$DOCKER" build --file "$REPO/images/entrypoints/Dockerfile" --tag "$ENTRYPOINTS_IMAGE" "$REPO"
    "$DOCKER" build --file "$REPO/images/cifar_mixup/Dockerfile" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --tag "$JOB_IMAGE" "$REPO"
  fi
  local start=$SECONDS
  "$REPO/tests/images/byo/build.sh" >&2
  OWN_IMAGE=$("$PYTHON" "$REPO/tests/images/byo/tags.py" mpich)
  log "loading $OPERATOR_IMAGE, $ENTRYPOINTS_IMAGE, $JOB_IMAGE and $OWN_IMAGE (a user's own image) into $CLUSTER"
  "$KIND" load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$ENTRYPOINTS_IMAGE" "$JOB_IMAGE" "$OWN_IMAGE"
  log "images loaded in $((SECONDS - start)) s"
}

# Two PersistentVolumes on the directory every node mounts (so they are ReadWriteMany, as shared storage on a real
# cluster would be) and their claims.
create_volumes() {
  log "creating namespace $NS and the claims $DATA_CLAIM, $CHECKPOINT_CLAIM"
  kc create namespace "$NS"
  local claim dir
  for claim in "$DATA_CLAIM:data" "$CHECKPOINT_CLAIM:checkpoints"; do
    dir=${claim#*:}
    claim=${claim%%:*}
    kc apply --filename=- <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: $NS-$claim}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: $NS, name: $claim}
  hostPath: {path: /kubetrain-volumes/$dir, type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim, namespace: $NS}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: $NS-$claim
  resources: {requests: {storage: 1Gi}}
EOF
  done
}

trap finish EXIT
check_tools
log "artifacts in $ARTIFACTS"
# shellcheck source=scenarios.sh
. "$HERE/scenarios.sh"
create_cluster
build_and_load_images
scenario_install
create_volumes
prepare_data
for scenario in $SCENARIOS; do
  "scenario_$scenario"
done
scenario_uninstall
log "PASSED: kind scenarios install, $SCENARIOS, uninstall"
