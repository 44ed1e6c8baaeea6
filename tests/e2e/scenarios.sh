# The kind scenarios, sourced by run-kind.sh (which defines the cluster, the names and log/fail/kc). Each one checks
# what a user would look at: `kubectl get`, the status, the logs, the files on the volumes.
# shellcheck shell=bash disable=SC2154

PHASES=$ARTIFACTS/phases.txt # "<name> <phase>" for every change of a DistributedTraining in $NS (watch_phases)

# run_pod_job NAME CLAIM MOUNT SCRIPT: a Job of the program image running SCRIPT (bash) with CLAIM at MOUNT, as the
# images' user; waits for it and prints its log.
run_pod_job() {
  local name=$1 claim=$2 mount=$3 script=$4
  "$PYTHON" - "$name" "$JOB_IMAGE" "$claim" "$mount" "$script" <<'EOF' | kc apply --namespace "$NS" --filename=-
import json
import sys

name, image, claim, mount, script = sys.argv[1:]
print(json.dumps({
    "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
    "spec": {"backoffLimit": 0, "template": {"spec": {
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
        "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": ["bash", "-ceu", script],
                        "volumeMounts": [{"name": "volume", "mountPath": mount}]}],
        "volumes": [{"name": "volume", "persistentVolumeClaim": {"claimName": claim}}]}}}}))
EOF
  local deadline=$((SECONDS + 600)) succeeded failed
  while true; do
    succeeded=$(kc get job "$name" --namespace "$NS" --output=jsonpath='{.status.succeeded}')
    failed=$(kc get job "$name" --namespace "$NS" --output=jsonpath='{.status.failed}')
    if [ "${succeeded:-0}" -ge 1 ]; then break; fi
    if [ "${failed:-0}" -ge 1 ]; then kc logs "job/$name" --namespace "$NS" >&2 || true; fail "Job $name failed"; fi
    if [ "$SECONDS" -gt "$deadline" ]; then fail "Job $name did not finish within 600s"; fi
    sleep 3
  done
  kc logs "job/$name" --namespace "$NS"
}

scenario_install() {
  log "scenario install: helm install kubetrain into $SYSTEM_NS"
  "$HELM" install kubetrain "$REPO/charts/kubetrain" --namespace "$SYSTEM_NS" --create-namespace \
    --set image.pullPolicy=IfNotPresent
  kc wait --for=condition=Established crd/distributedtrainings.kubetrain.dev --timeout=60s
  kc rollout status deployment/kubetrain --namespace "$SYSTEM_NS" --timeout=300s
  kc wait --for=condition=Ready pod --selector=app.kubernetes.io/instance=kubetrain --namespace "$SYSTEM_NS" \
    --timeout=120s
  local answer
  answer=$(kc get distributedtrainings --all-namespaces 2>&1)
  [ "$answer" = "No resources found" ] || fail "kubectl get dtr on a new cluster printed: $answer"
  log "PASSED scenario install: the operator is Ready and kubectl get dtr answers"
}

# Records every phase change of every DistributedTraining in $NS into $PHASES, in the background.
watch_phases() {
  kc get distributedtrainings --namespace "$NS" --watch \
    --output=jsonpath='{.metadata.name} {.status.phase}{"\n"}' >>"$PHASES" 2>/dev/null &
}

# phases NAME: the phases NAME went through, in order, repeats folded ("Pending Starting Running Succeeded").
phases() { awk -v name="$1" '$1 == name && NF == 2 {print $2}' "$PHASES" | uniq | tr '\n' ' ' | sed 's/ $//'; }

prepare_data() {
  log "data preparation Job: scikit-learn digits -> $DATA_MOUNT/digits/{train,test}.h5 on $DATA_CLAIM"
  run_pod_job prepare-data "$DATA_CLAIM" "$DATA_MOUNT" \
    "python -m cifar_mixup.convert digits --out $DATA_MOUNT/digits && ls -l $DATA_MOUNT/digits"
  watch_phases
}

# render_job NAME EPOCHS [IMAGE]: jobs/cifar_mixup/job.yaml as shipped, with the small settings of this test (the
# loaded image, 2 workers x 1 slot without GPUs, our claims, the digits data) into $ARTIFACTS/NAME.yaml.
render_job() {
  "$PYTHON" - "$REPO/jobs/cifar_mixup/job.yaml" "$ARTIFACTS/$1.yaml" "$1" "$2" "${3:-$JOB_IMAGE}" \
    "$DATA_CLAIM" "$DATA_MOUNT" "$CHECKPOINT_CLAIM" "$CHECKPOINT_MOUNT" <<'EOF'
import sys

import yaml

source, target, name, epochs, image, data_claim, data_mount, checkpoint_claim, checkpoint_mount = sys.argv[1:]
with open(source) as handle:
    body = yaml.safe_load(handle)
body["metadata"]["name"] = name
spec = body["spec"]
spec["image"] = image
spec["imagePullPolicy"] = "IfNotPresent"
spec["command"] = ["python", "-m", "cifar_mixup", "--data-dir", f"{data_mount}/digits", "--epochs", epochs,
                   "--batch-size", "32", "--seed", "0", "--mixup", "--alpha", "0.2"]
spec["workers"] = 2
spec["slotsPerWorker"] = 1
spec["resources"] = {"gpusPerWorker": 0, "cpu": "500m", "memory": "1500Mi"}
spec["data"] = {"claimName": data_claim, "mountPath": data_mount, "readOnly": True}
spec["checkpoint"] = {"claimName": checkpoint_claim, "mountPath": checkpoint_mount}
spec.pop("scheduling", None)  # no GPU node selectors or tolerations on kind
spec.setdefault("runPolicy", {})["backoffLimit"] = 1
with open(target, "w") as handle:
    yaml.safe_dump(body, handle, sort_keys=False)
EOF
}

status() { kc get distributedtraining "$1" --namespace "$NS" --output=jsonpath="{.status.$2}"; }

# wait_phase NAME PHASE: waits until NAME is in PHASE; fails at once if it ends in another phase.
wait_phase() {
  local name=$1 wanted=$2 deadline=$((SECONDS + TIMEOUT)) phase
  while true; do
    phase=$(status "$name" phase)
    [ "$phase" = "$wanted" ] && return 0
    case "$phase" in
      Succeeded | Failed) fail "$name ended $phase, not $wanted: $(status "$name" reason): $(status "$name" message)" ;;
    esac
    [ "$SECONDS" -gt "$deadline" ] && fail "$name not $wanted within ${TIMEOUT}s (phase ${phase:-<none>})"
    sleep 2
  done
}

# check_finished NAME EPOCHS: status.progress and status.checkpoint show the finished training, `kubectl get dtr`
# shows its epochs and metric; prints the checkpoint path.
check_finished() {
  local name=$1 epochs=$2 row header
  header=$(kc get distributedtraining "$name" --namespace "$NS" | sed -n 1p) # sed reads all: no SIGPIPE under pipefail
  [[ "$header" =~ ^NAME\ +PHASE\ +WORKERS\ +EPOCH\ +METRIC\ +AGE$ ]] ||
    fail "kubectl get dtr should show the columns NAME PHASE WORKERS EPOCH METRIC AGE: $header"
  row=$(kc get distributedtraining "$name" --namespace "$NS" --no-headers)
  log "kubectl get dtr: $row"
  [[ "$row" =~ ^$name\ +Succeeded\ +[0-9]+/2\ +$epochs/$epochs\ +[a-z_]+=[0-9.]+\ + ]] ||
    fail "kubectl get dtr should show Succeeded, $epochs/$epochs epochs and a metric: $row"
  kc get distributedtraining "$name" --namespace "$NS" --output=json | EPOCHS=$epochs "$PYTHON" -c '
import json
import os
import sys

status = json.load(sys.stdin).get("status") or {}
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
' || fail "the status of $name does not show the finished training"
}

scenario_train() {
  local name=cifar-mixup phases_seen checkpoint dir
  render_job "$name" "$EPOCHS"
  log "scenario train: kubectl apply -f jobs/cifar_mixup/job.yaml as $NS/$name ($EPOCHS epochs, 2 workers x 1 slot)"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/$name.yaml"
  wait_phase "$name" Succeeded
  phases_seen=$(phases "$name")
  [ "$phases_seen" = "Pending Starting Running Succeeded" ] ||
    fail "$name went through '$phases_seen', not 'Pending Starting Running Succeeded'"
  log "phases: $phases_seen; workers ran on $(kc get pods --namespace "$NS" \
    --selector="kubetrain.dev/job-name=$name" --output=jsonpath='{.items[*].spec.nodeName}')"
  checkpoint=$(check_finished "$name" "$EPOCHS")
  dir=$CHECKPOINT_MOUNT/$NS/$name
  log "reading $checkpoint, history.json and history.png back from the checkpoint volume"
  run_pod_job read-checkpoint "$CHECKPOINT_CLAIM" "$CHECKPOINT_MOUNT" "
    ls -lR $dir
    test -e $checkpoint || test -n \"\$(ls -d $checkpoint* 2>/dev/null)\"
    python - <<'PY'
import json
with open('$dir/history.json') as handle:
    epochs = [record['epoch'] for record in json.load(handle)['epochs']]
assert epochs == list(range(1, $EPOCHS + 1)), f'history.json has epochs {epochs}'
with open('$dir/history.png', 'rb') as handle:
    assert handle.read(8) == b'\x89PNG\r\n\x1a\n', 'history.png is not a PNG'
print('history.json: epochs', epochs, '; history.png is a PNG')
PY"
  log "PASSED scenario train"
}

# A user's own image (tests/images/byo: Python, sshd and MPICH from PyPI, not FROM kubetrain/base, no uid 1000 in it)
# as a user writes it: one worker and the launcher as a second, an mpi4py allreduce across both pods.
scenario_own_image() {
  local name=own-image log
  log "scenario own image: $name with $OWN_IMAGE (MPICH), 1 worker + the launcher as a worker"
  kc apply --namespace "$NS" --filename=- <<EOF
apiVersion: kubetrain.dev/v1alpha1
kind: DistributedTraining
metadata: {name: $name}
spec:
  image: $OWN_IMAGE
  imagePullPolicy: IfNotPresent
  command: [python, /opt/byo/allreduce.py, "2"]
  mpi: {implementation: MPICH}
  workers: 1
  launcher: {runAsWorker: true}
  resources: {cpu: 500m, memory: 512Mi}
EOF
  wait_phase "$name" Succeeded
  log=$(kc logs "job/$name-launcher" --namespace "$NS")
  [[ "$log" == *"allreduce ok: size=2 sum=3 rank0=$name-launcher implementation=MPICH"* ]] ||
    fail "$name: the launcher's log does not show the 2-rank allreduce with rank 0 on the launcher: $log"
  log "PASSED scenario own image: $(grep -o 'allreduce ok.*' <<<"$log")"
}

scenario_restart() {
  local name=cifar-mixup-restart epochs=$((EPOCHS + 1)) deadline epoch="" launcher restored
  render_job "$name" "$epochs"
  log "scenario restart: $name ($epochs epochs); a worker pod is deleted once epoch 1 is done"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/$name.yaml"
  deadline=$((SECONDS + TIMEOUT))
  while [ "${epoch:-0}" -lt 1 ]; do
    epoch=$(status "$name" progress.epoch)
    [ "$(status "$name" phase)" = Succeeded ] && fail "$name finished before a worker could be deleted"
    [ "$SECONDS" -gt "$deadline" ] && fail "$name reported no finished epoch within ${TIMEOUT}s"
    sleep 1
  done
  log "epoch $epoch done: deleting pod $name-worker-1"
  kc delete pod "$name-worker-1" --namespace "$NS" --wait=false
  wait_phase "$name" Succeeded
  [[ " $(phases "$name") " == *" Restarting "* ]] || fail "$name never showed Restarting: $(phases "$name")"
  [ "$(status "$name" restarts)" = 1 ] || fail "$name has status.restarts=$(status "$name" restarts), expected 1"
  launcher=$(kc get pods --namespace "$NS" --selector="kubetrain.dev/job-name=$name,kubetrain.dev/role=launcher" \
    --sort-by=.metadata.creationTimestamp --output=jsonpath='{.items[-1:].metadata.name}')
  restored=$(kc logs "$launcher" --namespace "$NS" | grep -o 'restored .* (epoch [0-9]*' | sed -n 1p || true)
  [[ "$restored" =~ \(epoch\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] ||
    fail "the new attempt's launcher $launcher did not log a resume from epoch 1 or later"
  log "phases: $(phases "$name"); the new attempt logged: $restored"
  check_finished "$name" "$epochs" >/dev/null
  log "PASSED scenario restart"
}

scenario_missing_image() {
  local name=cifar-mixup-missing-image image=kubetrain/does-not-exist:$TAG deadline reason message
  render_job "$name" 1 "$image"
  log "scenario missing image: $name with image $image"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/$name.yaml"
  deadline=$((SECONDS + 600))
  until [ "$(status "$name" phase)" = Failed ]; do # after its one restart (backoffLimit 1): the image never comes
    [ "$SECONDS" -gt "$deadline" ] && fail "$name not Failed within 600 s (phase $(status "$name" phase))"
    sleep 2
  done
  reason=$(status "$name" reason)
  [ "$reason" = ImagePullFailed ] || fail "$name failed with reason $reason, not ImagePullFailed"
  message=$(status "$name" message)
  log "$name: Failed ImagePullFailed: $message"
  [[ "$message" == *"$image"* ]] || fail "the status message does not name the image $image: $message"
  [[ "$message" == *ErrImagePull* || "$message" == *ImagePullBackOff* ]] ||
    fail "the status message does not say ErrImagePull or ImagePullBackOff: $message"
  log "PASSED scenario missing image"
}

scenario_delete() {
  local left deadline=$((SECONDS + 180))
  log "scenario delete: kubectl delete dtr --all in $NS"
  kc delete distributedtrainings --all --namespace "$NS" --wait=true --timeout=120s
  while true; do
    left=$(kc get pods,jobs,services,configmaps,secrets,serviceaccounts,roles,rolebindings --namespace "$NS" \
      --selector=kubetrain.dev/job-name --output=name)
    [ -z "$left" ] && break
    [ "$SECONDS" -gt "$deadline" ] && fail "children left 180 s after kubectl delete dtr: $left"
    sleep 2
  done
  log "PASSED scenario delete: no child of any DistributedTraining is left"
}

leftovers() {
  local kinds
  kinds=$(kc api-resources --verbs=list --namespaced --output=name | grep -v '^events' | paste -sd, -)
  kc get "$kinds" --namespace "$SYSTEM_NS" --output=name 2>/dev/null |
    grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' || true
  kc get clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations \
    --output=name | grep kubetrain || true
}

scenario_uninstall() {
  local left deadline=$((SECONDS + 120))
  log "scenario uninstall: helm uninstall kubetrain"
  "$HELM" uninstall kubetrain --namespace "$SYSTEM_NS" --wait --timeout 180s
  # The operator's pod stops and is garbage-collected after Helm returns; its Lease (owned by that pod) goes with it.
  while left=$(leftovers) && [ -n "$left" ] && [ $SECONDS -lt $deadline ]; do sleep 2; done
  [ -z "$left" ] || fail "helm uninstall left (after 120 s): $left"
  kc get crd distributedtrainings.kubetrain.dev --output=name >/dev/null ||
    fail "helm uninstall removed the CRD (Helm keeps crds/, so the users' DistributedTrainings survive)"
  log "PASSED scenario uninstall: nothing of ours is left but the CRD"
}
