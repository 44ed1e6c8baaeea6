#!/usr/bin/env bash
# kubetrain launcher: `launcher <command...>` runs the training command on every hostfile host with the job's MPI, or
# with horovodrun's elastic mode for a job with spec.elastic (KUBETRAIN_ELASTIC_MAX_WORKERS set).
# Run by ../launcher, which checks that the image has bash; the image needs ssh (openssh-client) and an MPI, or
# Horovod (with Gloo) for an elastic job.
#
# 1. copies the job's private key, ssh client config and known_hosts from KUBETRAIN_SSH_DIR (Secret <name>-ssh) into
#    a writable $HOME/.ssh (any uid);
# 2. finds the MPI: KUBETRAIN_MPI_IMPLEMENTATION (spec.mpi.implementation: OpenMPI, IntelMPI or MPICH) and what its
#    launcher's `--version` prints (Open MPI 4 and 5 take different options); a different MPI in the image is named.
#    An elastic job needs horovodrun instead;
# 3. waits until every other host in KUBETRAIN_HOSTFILE accepts an ssh login (`ssh host true`), for at most
#    KUBETRAIN_WAIT_SECONDS (default 300) in total. It checks KUBETRAIN_SSH_CHECKS hosts at a time (default 32), and
#    retries a host while its name does not resolve yet or its sshd is not listening. Its own line
#    (launcher.runAsWorker) needs only to resolve. An elastic job waits for KUBETRAIN_ELASTIC_MIN_WORKERS of them;
# 4. runs the implementation's command line (lib/mpi.sh) with KUBETRAIN_NUM_PROCESSES ranks, forwarding PATH,
#    LD_LIBRARY_PATH, PYTHONPATH, every name in KUBETRAIN_FORWARD_ENV and any NCCL_, HOROVOD_, FI_, I_MPI_, UCX_ or
#    MPIR_CVAR_ variable to the ranks. An elastic job runs horovodrun (lib/elastic.sh, lib/horovodrun.py) instead:
#    it runs ranks on the Ready workers lib/discover_hosts.py finds, from minWorkers to maxWorkers, with its environment.
#    Names in KUBETRAIN_POD_ENV are never forwarded: each rank starts through lib/pod-env.sh, which gives it its own
#    pod's values (saved by kt_save_pod_env on every pod).
# 5. runs that command through lib/run_with_report.py: its output streams to the log as before, and when it fails,
#    which rank failed (the MPI's summary, else the rank whose output ended last), its exit code and its last lines go
#    to KUBETRAIN_TERMINATION_LOG (default /dev/termination-log, the container's terminationMessagePath), where the
#    operator reads them. That takes a Python 3.7 or newer in the image (python3, or horovodrun's own); without one the
#    command is exec'd as is, and the job's status has the log's last lines only.
# The MPI reaches the workers with `ssh -F $HOME/.ssh/ssh_config -i <key> -p KUBETRAIN_SSH_PORT`. The config checks
# every worker's host key against known_hosts: the job's host key, which only its workers hold. horovodrun's ssh has
# no -F (the config is ~/.ssh/config) and passes `-o StrictHostKeyChecking=no`: an ssh first on its PATH puts
# `-o StrictHostKeyChecking=yes` before that, and ssh takes the first value it is given.
# A Secret without known_hosts (written before host keys were pinned) has a config that checks no host key.
# Exit codes: the program's (through the MPI or horovodrun); 2 = bad configuration or a tool missing from the image;
# 3 = a worker never accepted ssh (message names it).
set -euo pipefail
KT_ROLE=launcher
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${BASH_SOURCE[0]%/*}/common.sh"
# shellcheck source=mpi.sh
. "$KT_LIB/mpi.sh"
# shellcheck source=elastic.sh
. "$KT_LIB/elastic.sh"

# kt_install_ssh_config FILE: horovodrun's ssh takes no -F. It reads ~/.ssh/config, and ssh's ~ is the home of the
# uid's passwd entry, which may differ from $HOME (root's /root in an image run as root): both get the config.
kt_install_ssh_config() {
  local home dir dirs=("$KT_SSH_DIR")
  home=$(kt_passwd_home) || home=$HOME
  [ "$home/.ssh" = "$KT_SSH_DIR" ] || dirs+=("$home/.ssh")
  for dir in "${dirs[@]}"; do
    if ! { mkdir -p "$dir" 2>/dev/null && chmod 0700 "$dir" && (umask 077 && cat "$1" >"$dir/config") 2>/dev/null; }
    then
      kt_log "cannot write $dir/config: horovodrun's ssh runs without the job's ssh options"
    fi
  done
}

# kt_report_python [PYTHON]: PYTHON, else python3 or python on PATH, when it is Python 3.7 or newer (what
# lib/run_with_report.py needs); prints nothing otherwise.
kt_report_python() {
  local candidate
  for candidate in "$@" python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 7))' >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
}

# kt_exec_reported FLAVOR PYTHON COMMAND...: execs COMMAND through lib/run_with_report.py run by PYTHON, which says
# which rank failed in the termination log; execs COMMAND itself when PYTHON is empty.
kt_exec_reported() {
  local flavor=$1 python=$2
  shift 2
  if [ -z "$python" ]; then
    kt_log "no Python 3.7 or newer in image $KT_IMAGE: a failure's report names no rank (the log's last lines only)"
    exec "$@"
  fi
  exec "$python" -B "$KT_LIB/run_with_report.py" "$flavor" "${KUBETRAIN_TERMINATION_LOG:-/dev/termination-log}" "$@"
}

# kt_absolute_ssh_config FILE: the config names its files as ~/.ssh/...; ssh's ~ is the home of the uid's passwd
# entry, which may differ from $HOME. Point them at the copies in KT_SSH_DIR.
kt_absolute_ssh_config() {
  local text
  text=$(<"$1")
  printf '%s\n' "${text//'~/.ssh/'/$KT_SSH_DIR/}" >"$1" || kt_die "cannot write $1"
}

# kt_install_strict_ssh DIR: an `ssh` in DIR, first on PATH, that checks host keys whatever horovodrun passes after.
kt_install_strict_ssh() {
  local real
  real=$(command -v ssh)
  if ! { mkdir -p "$1" && printf '#!/bin/sh\nexec %q -o StrictHostKeyChecking=yes "$@"\n' "$real" >"$1/ssh" &&
    chmod 0755 "$1/ssh"; }; then
    kt_die "cannot write $1/ssh"
  fi
  export PATH="$1:$PATH"
}

[ $# -gt 0 ] || kt_die "usage: launcher <command...> (the job's spec.command)"
hostfile=${KUBETRAIN_HOSTFILE:-/etc/kubetrain/hosts/hostfile}
[ -r "$hostfile" ] || kt_die "KUBETRAIN_HOSTFILE=$hostfile is missing (the job's <name>-hosts ConfigMap is not mounted)"
num_processes=${KUBETRAIN_NUM_PROCESSES:-}
[[ $num_processes =~ ^[1-9][0-9]*$ ]] || kt_die "KUBETRAIN_NUM_PROCESSES='$num_processes' must be a positive integer"
wait_seconds=${KUBETRAIN_WAIT_SECONDS:-300}
[[ $wait_seconds =~ ^[0-9]+$ ]] || kt_die "KUBETRAIN_WAIT_SECONDS='$wait_seconds' must be a whole number of seconds"
ssh_checks=${KUBETRAIN_SSH_CHECKS:-32}
[[ $ssh_checks =~ ^[1-9][0-9]*$ ]] || kt_die "KUBETRAIN_SSH_CHECKS='$ssh_checks' must be a positive integer"
elastic_max=${KUBETRAIN_ELASTIC_MAX_WORKERS:-}

kt_require ssh openssh-client
if [ -n "$elastic_max" ]; then
  elastic_min=${KUBETRAIN_ELASTIC_MIN_WORKERS:-1}
  [[ $elastic_min =~ ^[1-9][0-9]*$ && $elastic_max =~ ^[1-9][0-9]*$ ]] && [ "$elastic_min" -le "$elastic_max" ] ||
    kt_die "KUBETRAIN_ELASTIC_MIN_WORKERS='$elastic_min' and KUBETRAIN_ELASTIC_MAX_WORKERS='$elastic_max' must be \
positive integers, min <= max"
  slots=${KUBETRAIN_SLOTS_PER_WORKER:-1}
  [[ $slots =~ ^[1-9][0-9]*$ ]] || kt_die "KUBETRAIN_SLOTS_PER_WORKER='$slots' must be a positive integer"
  export KUBETRAIN_ELASTIC_HOSTS=${KUBETRAIN_ELASTIC_HOSTS:-/etc/kubetrain/hosts/elastic-hosts}
  [ -r "$KUBETRAIN_ELASTIC_HOSTS" ] || kt_die "KUBETRAIN_ELASTIC_HOSTS=$KUBETRAIN_ELASTIC_HOSTS is missing (the job's \
<name>-hosts ConfigMap is not mounted)"
  [ -n "${KUBETRAIN_READY_SERVICE:-}" ] || kt_die "KUBETRAIN_READY_SERVICE is not set (the <name>-ready Service's name)"
  horovodrun=$(command -v horovodrun) || kt_die "horovodrun not found in image $KT_IMAGE (PATH=$PATH): install \
Horovod with Gloo there (HOROVOD_WITH_GLOO=1 pip install horovod), or leave out spec.elastic"
  # horovodrun (lib/horovodrun.py) and the discovery run with horovodrun's own Python, which has Horovod.
  read -r shebang <"$horovodrun" || true
  python=$(kt_elastic_python "$shebang")
  command -v "$python" >/dev/null 2>&1 || python=$(command -v python3 || command -v python) ||
    kt_die "no Python for horovodrun in image $KT_IMAGE ($horovodrun starts with '$shebang')"
  kt_log "horovodrun: $horovodrun, run with $python"
else
  implementation=${KUBETRAIN_MPI_IMPLEMENTATION:-OpenMPI}
  program=$(kt_mpi_program "$implementation")
  command -v "$program" >/dev/null 2>&1 || kt_die "$program not found in image $KT_IMAGE (PATH=$PATH): install \
$implementation there, or set spec.mpi.implementation to the MPI the image has"
  version=$("$program" --version 2>&1 || true)
  flavor=$(kt_mpi_flavor "$implementation" "$version") || kt_die "$flavor"
  kt_log "$program: ${version%%$'\n'*} ($flavor)"
fi
kt_prepare_home
kt_ensure_user
kt_save_pod_env
kt_copy_ssh_files id_ed25519 ssh_config
checked=0
if [ -e "${KUBETRAIN_SSH_DIR:-/etc/kubetrain/ssh}/known_hosts" ]; then
  kt_copy_ssh_files known_hosts
  checked=1
else
  kt_log "the job's Secret has no known_hosts: workers' host keys are not checked"
fi
kt_absolute_ssh_config "$KT_SSH_DIR/ssh_config"
if [ -n "$elastic_max" ]; then
  kt_install_ssh_config "$KT_SSH_DIR/ssh_config"
  [ "$checked" = 1 ] && kt_install_strict_ssh "$HOME/.kubetrain/bin"
fi

ssh_options=(-F "$KT_SSH_DIR/ssh_config" -i "$KT_SSH_DIR/id_ed25519" -p "$KT_PORT" -o LogLevel=ERROR -o BatchMode=yes)

# Hosts: first field of every line that is not blank or a comment (`<host> slots=<n>` or `<host>:<n>`).
hosts=()
while read -r line; do
  [ -n "$line" ] && [ "${line:0:1}" != "#" ] && hosts+=("${line%%[ :]*}")
done <"$hostfile"
[ ${#hosts[@]} -gt 0 ] || kt_die "hostfile $hostfile lists no hosts"

# resolves HOST: DNS answers for it (getent where the image has it, else left to ssh and the MPI).
resolves() { ! command -v getent >/dev/null 2>&1 || getent hosts "$1" >/dev/null 2>&1; }

# this pod's own line (launcher.runAsWorker): it runs ranks here, without ssh.
is_own() { [ "${1%%.*}" = "${HOSTNAME%%.*}" ]; }
# A launcher that runs ranks holds the workers' GPUs, and checks them as a worker does.
for host in "${hosts[@]}"; do is_own "$host" && kt_check_gpus; done

# Bounded wait: one `ssh host true` per pending host per round, ssh_checks of them at once (tests/bench/host_check.py
# measures that against one at a time); the last error per host explains a timeout.
# An elastic job goes on after a round in which minWorkers workers accepted; horovodrun adds the others later.
declare -A last_error=()
pending=("${hosts[@]}")
accepted=0
deadline=$((SECONDS + wait_seconds))
if [ -n "$elastic_max" ]; then
  kt_log "waiting up to ${wait_seconds}s for $elastic_min of ${#hosts[@]} host(s) (elastic.minWorkers): ${hosts[*]}"
else
  kt_log "waiting up to ${wait_seconds}s for ${#hosts[@]} host(s): ${hosts[*]}"
fi
checks=$(mktemp -d "${TMPDIR:-/tmp}/kubetrain-ssh-checks.XXXXXX") || kt_die "cannot make a folder under ${TMPDIR:-/tmp}"
trap 'rm -rf "$checks"' EXIT  # also when the wait gives up
# check_host INDEX HOST CONNECT: one `ssh HOST true`; $checks/INDEX.ok on success, else $checks/INDEX.err says why.
# The check sends nothing but `true`: its key exchange is plain elliptic-curve Diffie-Hellman (curve25519, else NIST
# P-256 where FIPS rules out curve25519), about a sixth of the client's CPU of OpenSSH 9's default post-quantum hybrid,
# which the MPI's own logins keep. A login that has connected gets 20 s more to finish on a busy CPU.
check_host() {
  local out
  if out=$(timeout "$(($3 + 20))" ssh "${ssh_options[@]}" -o ConnectTimeout="$3" \
    -o KexAlgorithms=curve25519-sha256@libssh.org,ecdh-sha2-nistp256 "$2" true 2>&1); then
    : >"$checks/$1.ok"
  else
    printf '%s' "${out:-ssh exited with status $?}" >"$checks/$1.err"
  fi
}
# wait_one: until one running check ends (bash 4.3's `wait -n`, so KUBETRAIN_SSH_CHECKS stay in flight); an older
# bash waits for all of them.
if [ $((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1])) -ge 403 ]; then
  wait_one() { wait -n || true; running=$((running - 1)); }
else
  wait_one() { wait; running=0; }
fi
while :; do
  left=$((deadline - SECONDS))
  connect=$((left < 10 ? left : 10))
  rm -f "$checks"/*
  index=0
  running=0
  for host in "${pending[@]}"; do
    if [ "$left" -gt 0 ] && ! is_own "$host"; then
      check_host "$index" "$host" "$connect" &
      running=$((running + 1))
      if [ "$running" -ge "$ssh_checks" ]; then wait_one; fi
    fi
    index=$((index + 1))
  done
  wait
  still=()
  own_pending=0
  index=0
  for host in "${pending[@]}"; do
    if [ "$left" -le 0 ]; then
      still+=("$host")
      is_own "$host" && own_pending=1
    elif is_own "$host"; then
      if resolves "$host"; then kt_log "this pod, $host, resolves"; else last_error[$host]="does not resolve"; still+=("$host"); own_pending=1; fi
    elif [ -e "$checks/$index.ok" ]; then
      kt_log "worker $host accepts ssh"
      accepted=$((accepted + 1))
    else
      last_error[$host]=$(cat "$checks/$index.err" 2>/dev/null || echo "no answer")
      still+=("$host")
    fi
    index=$((index + 1))
  done
  pending=("${still[@]+"${still[@]}"}")
  [ ${#pending[@]} -eq 0 ] && break
  if [ -n "$elastic_max" ] && [ "$own_pending" = 0 ] && [ "$accepted" -ge "$elastic_min" ]; then
    kt_log "going on without ${pending[*]}: horovodrun adds them when they are Ready"
    break
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    for host in "${pending[@]}"; do
      kt_log "worker $host did not accept ssh on port $KT_PORT within ${wait_seconds}s: ${last_error[$host]:-no attempt}"
    done
    [ -n "$elastic_max" ] && kt_die "giving up on worker(s) ${pending[*]} after ${wait_seconds}s: $accepted \
accepted ssh and the job needs elastic.minWorkers=$elastic_min (launcher.waitForWorkersSeconds)" 3
    kt_die "giving up on worker(s) ${pending[*]} after ${wait_seconds}s (launcher.waitForWorkersSeconds)" 3
  fi
  sleep 1
done
rm -rf "$checks"
trap - EXIT

# The interface of this pod's default route: Hydra's proxies dial back to its address, Gloo's ranks use it.
iface=""
[ -r /proc/net/route ] && while read -r name destination _; do
  [ "$destination" = 00000000 ] && iface=$name && break
done </proc/net/route

# What every host runs for each rank: the training command, through lib/pod-env.sh when some of the job's env is
# each pod's own (KUBETRAIN_POD_ENV).
rank_command=("$@")
[ -n "${KUBETRAIN_POD_ENV:-}" ] && rank_command=(bash "$KT_LIB/pod-env.sh" "$@")

if [ -n "$elastic_max" ]; then
  own_slots=0
  for host in "${hosts[@]}"; do is_own "$host" && own_slots=$slots; done
  kt_elastic_command "$python" "$KT_LIB" "$elastic_min" "$elastic_max" "$slots" "$own_slots" "$iface" \
    "$wait_seconds" "$KT_PORT" "$KT_SSH_DIR/id_ed25519" "${KUBETRAIN_POD_ENV:-}" "${rank_command[@]}"
  kt_log "$accepted worker(s) ready; horovodrun with $elastic_min to $elastic_max worker(s) of $slots slot(s): $*"
  kt_exec_reported elastic "$(kt_report_python "$python")" "${KT_ELASTIC_ARGV[@]}"
fi

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
  [[ " ${KUBETRAIN_POD_ENV:-} " == *" $name "* ]] && continue  # each rank takes its own pod's value (pod-env.sh)
  [[ " ${forward[*]-} " == *" $name "* ]] || forward+=("$name")
done

as_root=0
[ "$(id -u)" = 0 ] && as_root=1
kt_mpi_command "$flavor" "$num_processes" "$hostfile" "${ssh_options[*]}" "$iface" "$as_root" "${forward[*]-}" \
  "${rank_command[@]}"
kt_log "all hosts ready; $program -np $num_processes $*"
kt_exec_reported "$flavor" "$(kt_report_python)" "${KT_MPI_ARGV[@]}"
