#!/usr/bin/env bash
# kubetrain launcher: `launcher <command...>` runs the training command on every hostfile host with the job's MPI.
# Run by ../launcher, which checks that the image has bash; the image needs ssh (openssh-client) and an MPI.
#
# 1. copies the job's key material from KUBETRAIN_SSH_DIR (Secret <name>-ssh) into a writable $HOME/.ssh (any uid);
# 2. finds the MPI: KUBETRAIN_MPI_IMPLEMENTATION (spec.mpi.implementation: OpenMPI, IntelMPI or MPICH) and what its
#    launcher's `--version` prints (Open MPI 4 and 5 take different options); a different MPI in the image is named;
# 3. waits until every other host in KUBETRAIN_HOSTFILE accepts an ssh login (`ssh host true`, retried while the name
#    does not resolve yet or sshd is not listening), for at most KUBETRAIN_WAIT_SECONDS (default 300) in total; its own
#    line (launcher.runAsWorker) needs only to resolve;
# 4. execs the implementation's command line (lib/mpi.sh) with KUBETRAIN_NUM_PROCESSES ranks, forwarding PATH,
#    LD_LIBRARY_PATH, PYTHONPATH, every name in KUBETRAIN_FORWARD_ENV and any NCCL_, HOROVOD_, FI_, I_MPI_, UCX_ or
#    MPIR_CVAR_ variable to the ranks.
# The MPI reaches the workers with `ssh -F $HOME/.ssh/ssh_config -i <key> -p KUBETRAIN_SSH_PORT`; host keys are not
# pinned because workers generate fresh ones at every start.
# Exit codes: the program's (through the MPI); 2 = bad configuration or a tool missing from the image; 3 = a worker
# never accepted ssh (message names it).
set -euo pipefail
KT_ROLE=launcher
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${BASH_SOURCE[0]%/*}/common.sh"
# shellcheck source=mpi.sh
. "$KT_LIB/mpi.sh"

[ $# -gt 0 ] || kt_die "usage: launcher <command...> (the job's spec.command)"
hostfile=${KUBETRAIN_HOSTFILE:-/etc/kubetrain/hosts/hostfile}
[ -r "$hostfile" ] || kt_die "KUBETRAIN_HOSTFILE=$hostfile is missing (the job's <name>-hosts ConfigMap is not mounted)"
num_processes=${KUBETRAIN_NUM_PROCESSES:-}
[[ $num_processes =~ ^[1-9][0-9]*$ ]] || kt_die "KUBETRAIN_NUM_PROCESSES='$num_processes' must be a positive integer"
wait_seconds=${KUBETRAIN_WAIT_SECONDS:-300}
[[ $wait_seconds =~ ^[0-9]+$ ]] || kt_die "KUBETRAIN_WAIT_SECONDS='$wait_seconds' must be a whole number of seconds"
implementation=${KUBETRAIN_MPI_IMPLEMENTATION:-OpenMPI}
program=$(kt_mpi_program "$implementation")

kt_require ssh openssh-client
command -v "$program" >/dev/null 2>&1 || kt_die "$program not found in image $KT_IMAGE (PATH=$PATH): install \
$implementation there, or set spec.mpi.implementation to the MPI the image has"
version=$("$program" --version 2>&1 || true)
flavor=$(kt_mpi_flavor "$implementation" "$version") || kt_die "$flavor"
kt_log "$program: ${version%%$'\n'*} ($flavor)"
kt_prepare_home
kt_ensure_user
kt_copy_ssh_files id_ed25519 ssh_config

ssh_options=(-F "$KT_SSH_DIR/ssh_config" -i "$KT_SSH_DIR/id_ed25519" -p "$KT_PORT"
  -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes)

# Hosts: first field of every line that is not blank or a comment (`<host> slots=<n>` or `<host>:<n>`).
hosts=()
while read -r line; do
  [ -n "$line" ] && [ "${line:0:1}" != "#" ] && hosts+=("${line%%[ :]*}")
done <"$hostfile"
[ ${#hosts[@]} -gt 0 ] || kt_die "hostfile $hostfile lists no hosts"

# resolves HOST: DNS answers for it (getent where the image has it, else left to ssh and the MPI).
resolves() { ! command -v getent >/dev/null 2>&1 || getent hosts "$1" >/dev/null 2>&1; }

# Bounded wait: one `ssh host true` per pending host per round; the last error per host explains a timeout.
declare -A last_error=()
pending=("${hosts[@]}")
deadline=$((SECONDS + wait_seconds))
kt_log "waiting up to ${wait_seconds}s for ${#hosts[@]} host(s): ${hosts[*]}"
while :; do
  still=()
  for host in "${pending[@]}"; do
    left=$((deadline - SECONDS))
    if [ "$left" -le 0 ]; then still+=("$host"); continue; fi
    connect=$((left < 10 ? left : 10))
    if [ "${host%%.*}" = "${HOSTNAME%%.*}" ]; then  # this pod's own line (launcher.runAsWorker): no ssh
      if resolves "$host"; then kt_log "this pod, $host, resolves"; else last_error[$host]="does not resolve"; still+=("$host"); fi
    elif out=$(timeout "$((connect + 5))" ssh "${ssh_options[@]}" -o ConnectTimeout="$connect" "$host" true 2>&1); then
      kt_log "worker $host accepts ssh"
    else
      last_error[$host]=${out:-ssh exited with status $?}
      still+=("$host")
    fi
  done
  pending=("${still[@]+"${still[@]}"}")
  [ ${#pending[@]} -eq 0 ] && break
  if [ "$SECONDS" -ge "$deadline" ]; then
    for host in "${pending[@]}"; do
      kt_log "worker $host did not accept ssh on port $KT_PORT within ${wait_seconds}s: ${last_error[$host]:-no attempt}"
    done
    kt_die "giving up on worker(s) ${pending[*]} after ${wait_seconds}s (launcher.waitForWorkersSeconds)" 3
  fi
  sleep 1
done

# Intel MPI's libfabric picks a provider by itself and can hang on a pod network; TCP unless the job chose one.
[ "$flavor" = intelmpi ] && export FI_PROVIDER=${FI_PROVIDER:-tcp}
# MPICH's shared-memory copies between ranks (cross-memory attach) need ptrace rights a restricted pod lacks.
[ "$flavor" = mpich ] && export MPIR_CVAR_CH4_CMA_ENABLE=${MPIR_CVAR_CH4_CMA_ENABLE:-0}

# Names to forward: the contract's list plus what MPI/NCCL/Horovod users commonly set; only names that are set.
forward=()
for name in PATH LD_LIBRARY_PATH PYTHONPATH ${KUBETRAIN_FORWARD_ENV:-} \
  $(compgen -e | grep -E '^(NCCL|HOROVOD|FI|I_MPI|UCX|MPIR_CVAR)_' || true); do
  [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { kt_log "ignoring bad name '$name' in KUBETRAIN_FORWARD_ENV"; continue; }
  [ -n "${!name+set}" ] || continue
  [[ " ${forward[*]-} " == *" $name "* ]] || forward+=("$name")
done

# Hydra's proxies dial back to this pod's address on the interface of its default route.
iface=""
[ -r /proc/net/route ] && while read -r name destination _; do
  [ "$destination" = 00000000 ] && iface=$name && break
done </proc/net/route
as_root=0
[ "$(id -u)" = 0 ] && as_root=1
kt_mpi_command "$flavor" "$num_processes" "$hostfile" "${ssh_options[*]}" "$iface" "$as_root" "${forward[*]-}" "$@"
kt_log "all hosts ready; $program -np $num_processes $*"
exec "${KT_MPI_ARGV[@]}"
