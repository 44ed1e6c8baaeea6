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
  # shellcheck disable=SC2153 # EPOCHS: set by run-kind.sh
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
  log=$(kc logs "job/$name-launcher" --namespace "$NS" --timestamps)
  [[ "$log" == *"allreduce ok: size=2 sum=3 rank0=$name-launcher implementation=MPICH"* ]] ||
    fail "$name: the launcher's log does not show the 2-rank allreduce with rank 0 on the launcher: $log"
  log "PASSED scenario own image: $(grep -o 'allreduce ok.*' <<<"$log")"
}

# delete_worker_after_an_epoch NAME: once NAME reports a finished epoch, deletes its pod NAME-worker-1; sets
# DELETED_AFTER_EPOCH to the epoch it reported then.
delete_worker_after_an_epoch() {
  local name=$1 deadline=$((SECONDS + TIMEOUT)) epoch=""
  while [ "${epoch:-0}" -lt 1 ]; do
    epoch=$(status "$name" progress.epoch)
    [ "$(status "$name" phase)" = Succeeded ] && fail "$name finished before a worker could be deleted"
    [ "$SECONDS" -gt "$deadline" ] && fail "$name reported no finished epoch within ${TIMEOUT}s"
    sleep 1
  done
  log "epoch $epoch done: deleting pod $name-worker-1"
  kc delete pod "$name-worker-1" --namespace "$NS" --wait=false
  DELETED_AFTER_EPOCH=$epoch
}

scenario_restart() {
  local name=cifar-mixup-restart epochs=$((EPOCHS + 1)) launcher restored
  render_job "$name" "$epochs"
  log "scenario restart: $name ($epochs epochs); a worker pod is deleted once epoch 1 is done"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/$name.yaml"
  delete_worker_after_an_epoch "$name"
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

# An elastic job (spec.elastic) as a user runs one: 2 workers, a worker pod deleted mid-training, then kubectl scale
# to 3. The job never restarts: the replacement and the third worker join the running training.
scenario_elastic() {
  local name=cifar-mixup-elastic epochs=40 epoch log resumed launchers ready_at
  render_job "$name" "$epochs"
  "$PYTHON" - "$ARTIFACTS/$name.yaml" <<'EOF'
import sys

import yaml

path = sys.argv[1]
with open(path) as handle:
    body = yaml.safe_load(handle)
body["spec"]["elastic"] = {"minWorkers": 1, "maxWorkers": 3}
body["spec"]["command"] += ["--commit-every-batches", "5"]
body["spec"]["resources"]["cpu"] = "400m"  # three workers and the launcher on the kind node
with open(path, "w") as handle:
    yaml.safe_dump(body, handle, sort_keys=False)
EOF
  log "scenario elastic: $name ($epochs epochs, workers 2 within 1..3); a worker pod is deleted once epoch 1 is done"
  kc apply --namespace "$NS" --filename "$ARTIFACTS/$name.yaml"
  delete_worker_after_an_epoch "$name"
  epoch=$DELETED_AFTER_EPOCH
  wait_status "$name" workers.lastJoined "$name-worker-1 at "
  ready_at=$(kc get pod "$name-worker-1" --namespace "$NS" \
    --output=jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
  log "left: $(status "$name" workers.lastLeft); joined: $(status "$name" workers.lastJoined); Ready at $ready_at"
  [ "$(status "$name" phase)" = Running ] || fail "$name is $(status "$name" phase) after losing a worker, not Running"
  wait_launcher_log "$name" "1 ranks train from" 1
  wait_launcher_log "$name" "2 ranks train from" 2 # the first start, then again with the replacement
  log "kubectl scale dtr $name --replicas 3"
  kc scale distributedtraining "$name" --namespace "$NS" --replicas 3
  wait_status "$name" workers.lastJoined "$name-worker-2 at "
  wait_launcher_log "$name" "3 ranks train from" 1
  wait_phase "$name" Succeeded
  [[ " $(phases "$name") " != *" Restarting "* ]] || fail "$name restarted: $(phases "$name")"
  [ "$(status "$name" restarts)" = 0 ] || fail "$name has status.restarts=$(status "$name" restarts), expected 0"
  launchers=$(kc get pods --namespace "$NS" --selector="kubetrain.dev/job-name=$name,kubetrain.dev/role=launcher" \
    --output=name | wc -l)
  [ "$launchers" = 1 ] || fail "$name had $launchers launcher pods, expected the one"
  log=$(kc logs "job/$name-launcher" --namespace "$NS" --timestamps)
  # Rank 0 logs where each (re)formed training starts: after the loss, no earlier than the epoch reported before it.
  resumed=$(grep -o '[0-9]* ranks train from epoch [0-9]*, step [0-9]*' <<<"$log" | tr '\n' ';' || true)
  log "the launcher's training (re)starts: $resumed"
  [[ "$resumed" == *"1 ranks train from epoch"* ]] || fail "$name never went on with 1 rank: $resumed"
  [[ "$resumed" == *"3 ranks train from epoch"* ]] || fail "$name never trained with 3 ranks: $resumed"
  "$PYTHON" - "$epoch" "$resumed" <<'EOF' || fail "$name went back before epoch $epoch after the loss: $resumed"
import re
import sys

reported, starts = int(sys.argv[1]), re.findall(r"(\d+) ranks train from epoch (\d+)", sys.argv[2])
after_loss = [int(epoch) for ranks, epoch in starts if ranks == "1"]
sys.exit(0 if after_loss and min(after_loss) >= reported else 1)
EOF
  # From the replacement's Ready to the first training with 2 ranks again after the shrink to 1.
  printf '%s\n' "$log" >"$ARTIFACTS/$name-launcher.log"
  "$PYTHON" - "$ready_at" "$ARTIFACTS/$name-launcher.log" <<'EOF' | while read -r line; do log "$line"; done
import re
import sys
from datetime import datetime

def moment(text):
    return datetime.fromisoformat(text.rstrip("Z")[:26])

ready, shrunk = moment(sys.argv[1]), False
for line in open(sys.argv[2]):
    found = re.search(r"^(\S+) .*?(\d+) ranks train from epoch", line)
    if not found:
        continue
    if found.group(2) == "1":
        shrunk = True
    elif shrunk and moment(found.group(1)) >= ready:
        print(f"the replacement trained {(moment(found.group(1)) - ready).total_seconds():.1f} s after it was Ready")
        break
EOF
  log "PASSED scenario elastic: $(kc get distributedtraining "$name" --namespace "$NS" --no-headers)"
}

# wait_launcher_log NAME TEXT COUNT: waits until the launcher's log has COUNT lines with TEXT; fails if the job ends
# first.
wait_launcher_log() {
  local name=$1 text=$2 count=$3 deadline=$((SECONDS + TIMEOUT)) seen
  while true; do
    seen=$(kc logs "job/$name-launcher" --namespace "$NS" 2>/dev/null | grep -c "$text" || true)
    [ "${seen:-0}" -ge "$count" ] && return 0
    case "$(status "$name" phase)" in
      Succeeded | Failed) fail "$name ended $(status "$name" phase) with $seen/$count launcher log lines '$text'" ;;
    esac
    [ "$SECONDS" -gt "$deadline" ] && fail "the launcher of $name logged '$text' $seen times, not $count, in ${TIMEOUT}s"
    sleep 2
  done
}

# wait_status NAME FIELD PREFIX: waits until status FIELD of NAME starts with PREFIX; fails if the job ends first.
wait_status() {
  local name=$1 field=$2 prefix=$3 deadline=$((SECONDS + TIMEOUT)) value
  while true; do
    value=$(status "$name" "$field")
    [[ "$value" == "$prefix"* ]] && return 0
    case "$(status "$name" phase)" in
      Succeeded | Failed) fail "$name ended $(status "$name" phase) before status.$field showed '$prefix'" ;;
    esac
    [ "$SECONDS" -gt "$deadline" ] && fail "status.$field of $name not '$prefix...' within ${TIMEOUT}s: '$value'"
    sleep 2
  done
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
