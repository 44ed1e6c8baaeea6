#!/usr/bin/env bash
# The user's path on a kind cluster, end to end:
#   kind cluster -> images built with docker and loaded -> helm install -> data + checkpoint PVCs
#   -> data preparation Job (scikit-learn digits -> HDF5 on the data volume) -> jobs/cifar_mixup/job.yaml with small
#   settings -> Succeeded -> the checkpoint on the volume and the progress in the status.
# On failure it prints the pods, events, DistributedTrainings and every container's log (also saved in $ARTIFACTS).
#
# Usage: tests/e2e/run-kind.sh            (from anywhere; needs docker, kind, helm, kubectl and python with PyYAML)
# Environment (defaults):
#   KUBETRAIN_KIND_CLUSTER=kubetrain-e2e   kind cluster name (an existing cluster of that name is deleted first)
#   KUBETRAIN_E2E_KEEP=0                   1: keep the cluster afterwards (kubeconfig in $ARTIFACTS/kubeconfig)
#   KUBETRAIN_E2E_EPOCHS=2                 epochs cifar_mixup trains
#   KUBETRAIN_E2E_TIMEOUT=1800             seconds the training may take to succeed
#   KUBETRAIN_E2E_ARTIFACTS=<temp dir>     where the kubeconfig, rendered job and failure dumps go
#   KUBETRAIN_E2E_SKIP_BUILD=0             1: use kubetrain/{base,operator,cifar-mixup}:$TAG already in docker
#   DOCKER, KIND, HELM, KUBECTL, PYTHON    the binaries to use
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE_BIN=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}/bin
CLUSTER=${KUBETRAIN_KIND_CLUSTER:-kubetrain-e2e}
KEEP=${KUBETRAIN_E2E_KEEP:-0}
EPOCHS=${KUBETRAIN_E2E_EPOCHS:-2}
TIMEOUT=${KUBETRAIN_E2E_TIMEOUT:-1800}
SKIP_BUILD=${KUBETRAIN_E2E_SKIP_BUILD:-0}
ARTIFACTS=${KUBETRAIN_E2E_ARTIFACTS:-$(mktemp -d -t kubetrain-e2e.XXXXXX)}
DOCKER=${DOCKER:-docker}
KIND=${KIND:-kind}
HELM=${HELM:-$( [ -x "$CACHE_BIN/helm" ] && echo "$CACHE_BIN/helm" || echo helm)}
KUBECTL=${KUBECTL:-$( [ -x "$CACHE_BIN/kubectl" ] && echo "$CACHE_BIN/kubectl" || echo kubectl)}
PYTHON=${PYTHON:-$( [ -x "$REPO/.venv/bin/python" ] && echo "$REPO/.venv/bin/python" || echo python3)}

TAG=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO/charts/kubetrain/Chart.yaml")
OPERATOR_IMAGE=kubetrain/operator:$TAG
BASE_IMAGE=kubetrain/base:$TAG
JOB_IMAGE=kubetrain/cifar-mixup:$TAG
SYSTEM_NS=kubetrain-system
NS=kubetrain-e2e
DATA_CLAIM=kubetrain-data
CHECKPOINT_CLAIM=kubetrain-checkpoints
DATA_MOUNT=/data
CHECKPOINT_MOUNT=/checkpoints
JOB_NAME=""

mkdir -p "$ARTIFACTS"
export KUBECONFIG=$ARTIFACTS/kubeconfig

log() { printf '[run-kind %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
kc() { "$KUBECTL" "$@"; }

dump() {
  local out=$ARTIFACTS/dump.txt
  log "dumping cluster state to $out"
  {
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
  if [ "$code" -ne 0 ] && [ -f "$KUBECONFIG" ]; then dump; fi
  if [ "$KEEP" = 1 ]; then
    log "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG)"
  else
    "$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  exit "$code"
}

need() {
  command -v "$1" >/dev/null 2>&1 || fail "$1 not found: $2"
}

check_tools() {
  need "$DOCKER" "install Docker"
  "$DOCKER" info >/dev/null 2>&1 || fail "docker info failed: start the Docker engine"
  need "$KIND" "install kind (https://kind.sigs.k8s.io)"
  need "$HELM" "run .ci/setup (it installs helm into $CACHE_BIN)"
  need "$KUBECTL" "run .ci/setup (it installs kubectl into $CACHE_BIN)"
  "$PYTHON" -c "import yaml" 2>/dev/null || fail "$PYTHON cannot import yaml: run .ci/setup or set PYTHON"
}

create_cluster() {
  if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "deleting the existing kind cluster $CLUSTER"
    "$KIND" delete cluster --name "$CLUSTER"
  fi
  log "creating kind cluster $CLUSTER"
  "$KIND" create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" --wait 180s
}

build_and_load_images() {
  if [ "$SKIP_BUILD" != 1 ]; then
    log "building $BASE_IMAGE (TensorFlow, OpenMPI, Horovod: slow the first time)"
    "$DOCKER" build --file "$REPO/images/base/Dockerfile" --tag "$BASE_IMAGE" "$REPO"
    log "building $OPERATOR_IMAGE and $JOB_IMAGE"
    "$DOCKER" build --file "$REPO/images/operator/Dockerfile" --tag "$OPERATOR_IMAGE" "$REPO"
    "$DOCKER" build --file "$REPO/images/cifar_mixup/Dockerfile" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --tag "$JOB_IMAGE" "$REPO"
  fi
  log "loading the images into $CLUSTER"
  "$KIND" load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$JOB_IMAGE"
}

install_chart() {
  log "helm install kubetrain into $SYSTEM_NS"
  "$HELM" install kubetrain "$REPO/charts/kubetrain" --namespace "$SYSTEM_NS" --create-namespace \
    --set image.pullPolicy=IfNotPresent
  kc wait --for=condition=Established crd/distributedtrainings.kubetrain.dev --timeout=60s
  kc rollout status deployment/kubetrain --namespace "$SYSTEM_NS" --timeout=180s
}

create_volumes() {
  log "creating namespace $NS and the PVCs $DATA_CLAIM, $CHECKPOINT_CLAIM"
  kc create namespace "$NS"
  for claim in "$DATA_CLAIM" "$CHECKPOINT_CLAIM"; do
    kc apply --namespace "$NS" --filename=- <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim}
spec:
  accessModes: [ReadWriteOnce]   # kind has one node; on a real cluster use ReadWriteMany storage
  resources: {requests: {storage: 1Gi}}
EOF
  done
}

# A pod spec fragment that runs as the images' user and mounts one claim.
run_pod_job() {
  local name=$1 claim=$2 mount=$3 script=$4
  kc apply --namespace "$NS" --filename=- <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $name}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
      containers:
        - name: main
          image: $JOB_IMAGE
          imagePullPolicy: IfNotPresent
          command: [bash, -ceu, '$script']
          volumeMounts: [{name: volume, mountPath: $mount}]
      volumes: [{name: volume, persistentVolumeClaim: {claimName: $claim}}]
EOF
  local deadline=$((SECONDS + 600))
  while true; do
    local succeeded failed
    succeeded=$(kc get job "$name" --namespace "$NS" --output=jsonpath='{.status.succeeded}')
    failed=$(kc get job "$name" --namespace "$NS" --output=jsonpath='{.status.failed}')
    if [ "${succeeded:-0}" -ge 1 ]; then break; fi
    if [ "${failed:-0}" -ge 1 ]; then kc logs "job/$name" --namespace "$NS" >&2 || true; fail "Job $name failed"; fi
    if [ "$SECONDS" -gt "$deadline" ]; then fail "Job $name did not finish within 600s"; fi
    sleep 5
  done
  kc logs "job/$name" --namespace "$NS"
}

prepare_data() {
  log "data preparation Job: scikit-learn digits -> $DATA_MOUNT/digits/{train,test}.h5"
  run_pod_job prepare-data "$DATA_CLAIM" "$DATA_MOUNT" \
    "python -m cifar_mixup.convert digits --out $DATA_MOUNT/digits && ls -l $DATA_MOUNT/digits"
}

# jobs/cifar_mixup/job.yaml as shipped, with the small settings of this test: the loaded image, 2 CPU workers,
# our claims, the digits data and $EPOCHS epochs.
render_job() {
  "$PYTHON" - "$REPO/jobs/cifar_mixup/job.yaml" "$ARTIFACTS/job.yaml" <<EOF
import sys
import yaml

source, target = sys.argv[1], sys.argv[2]
with open(source) as handle:
    body = yaml.safe_load(handle)
spec = body["spec"]
spec["image"] = "$JOB_IMAGE"
spec["imagePullPolicy"] = "IfNotPresent"
spec["command"] = ["python", "-m", "cifar_mixup", "--data-dir", "$DATA_MOUNT/digits", "--epochs", "$EPOCHS",
                   "--batch-size", "32", "--seed", "0"]
spec["workers"] = 2
spec["slotsPerWorker"] = 1
spec["resources"] = {"gpusPerWorker": 0, "cpu": "500m", "memory": "1500Mi"}
spec["data"] = {"claimName": "$DATA_CLAIM", "mountPath": "$DATA_MOUNT", "readOnly": True}
spec["checkpoint"] = {"claimName": "$CHECKPOINT_CLAIM", "mountPath": "$CHECKPOINT_MOUNT"}
spec.pop("scheduling", None)  # no GPU node selectors or tolerations on kind
spec.setdefault("runPolicy", {})["backoffLimit"] = 1
with open(target, "w") as handle:
    yaml.safe_dump(body, handle, sort_keys=False)
print(body["metadata"]["name"])
EOF
}

train() {
  JOB_NAME=$(render_job)
  log "applying jobs/cifar_mixup/job.yaml as $NS/$JOB_NAME ($EPOCHS epochs, 2 workers)"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/job.yaml"
  local deadline=$((SECONDS + TIMEOUT)) phase="" last=""
  while true; do
    phase=$(kc get distributedtraining "$JOB_NAME" --namespace "$NS" --output=jsonpath='{.status.phase}')
    if [ "$phase" != "$last" ]; then
      log "phase: ${phase:-<none>}"
      last=$phase
    fi
    case "$phase" in
      Succeeded) break ;;
      Failed) fail "$JOB_NAME failed: $(kc get distributedtraining "$JOB_NAME" --namespace "$NS" \
                 --output=jsonpath='{.status.reason}: {.status.message}')" ;;
    esac
    if [ "$SECONDS" -gt "$deadline" ]; then fail "$JOB_NAME not Succeeded within ${TIMEOUT}s"; fi
    sleep 10
  done
  kc get distributedtraining "$JOB_NAME" --namespace "$NS" --output=wide
}

check_results() {
  local status
  status=$(kc get distributedtraining "$JOB_NAME" --namespace "$NS" --output=json)
  log "checking status.progress and status.checkpoint"
  local checkpoint
  checkpoint=$(STATUS=$status EPOCHS=$EPOCHS "$PYTHON" - <<'EOF'
import json
import os
import sys

status = json.loads(os.environ["STATUS"]).get("status") or {}
epochs = int(os.environ["EPOCHS"])
progress, checkpoint = status.get("progress") or {}, status.get("checkpoint") or {}
problems = []
if progress.get("epochs") != epochs or progress.get("epoch") != epochs:
    problems.append(f"status.progress should show epoch {epochs} of {epochs}, got {progress}")
if not progress.get("metrics"):
    problems.append(f"status.progress.metrics is empty: {progress}")
if not checkpoint.get("path") or checkpoint.get("epoch") != epochs:
    problems.append(f"status.checkpoint should name the epoch-{epochs} checkpoint, got {checkpoint}")
if problems:
    sys.exit("\n".join(problems))
print(checkpoint["path"])
EOF
  ) || fail "the status does not show the finished training"
  log "checking $checkpoint on the checkpoint volume"
  run_pod_job check-checkpoint "$CHECKPOINT_CLAIM" "$CHECKPOINT_MOUNT" \
    "test -e $checkpoint && ls -lR $CHECKPOINT_MOUNT/$NS/$JOB_NAME"
}

trap finish EXIT
check_tools
log "artifacts in $ARTIFACTS"
create_cluster
build_and_load_images
install_chart
create_volumes
prepare_data
train
check_results
log "PASSED: $JOB_NAME Succeeded on kind with progress and a checkpoint"
