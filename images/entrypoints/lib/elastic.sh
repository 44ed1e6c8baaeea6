# shellcheck shell=bash
# The launcher's horovodrun command line for an elastic job (sourced by lib/launcher.sh and by the unit tests).
# Pure functions of their arguments, like lib/mpi.sh: no file, network or process is touched here.
#
#   kt_elastic_python SHEBANG     the interpreter on horovodrun's first line (`#!/opt/venv/bin/python`,
#                                 `#!/usr/bin/env python3`); prints nothing for another form.
#   kt_elastic_command PYTHON LIB MIN MAX SLOTS OWN_SLOTS IFACE WAIT PORT KEY POD_NAMES COMMAND...
#                                 sets KT_ELASTIC_ARGV: horovodrun (LIB/horovodrun.py run by PYTHON) from MIN to MAX
#                                 workers of SLOTS ranks each, plus OWN_SLOTS ranks on the launcher
#                                 (launcher.runAsWorker; 0 otherwise); LIB/discover_hosts.py finds the Ready workers.
#                                 POD_NAMES (KUBETRAIN_POD_ENV, space-separated) stay out of horovodrun's environment,
#                                 which it writes into every rank's command line (COMMAND then starts with
#                                 lib/pod-env.sh, which gives each rank its own pod's values of them).

# Launcher-only variables that horovodrun would write on every rank's command line, as it does its whole environment:
# HOSTNAME would name the launcher on the workers; the launcher's NVIDIA_* say which GPUs its own container got;
# KT_POD_ENV_FILE is where the launcher saved its own pod's values (lib/pod-env.sh).
# PATH, HOME, LD_PRELOAD and NSS_WRAPPER_* stay: workers run the same image, uid and HOME, so their values are the
# same there, and horovodrun's own ssh needs nss_wrapper for an uid without a passwd entry.
KT_LAUNCHER_ONLY_ENV=(HOSTNAME NVIDIA_VISIBLE_DEVICES NVIDIA_DRIVER_CAPABILITIES KT_POD_ENV_FILE)
# A lost host leaves Horovod's blacklist after 5 to 60 s (growing with each failure). Without a cooldown, a
# replacement pod under the same name would never be used again.
KT_BLACKLIST_COOLDOWN=(5 60)

kt_elastic_python() {
  local line=${1#\#!} words=()
  [ "$line" != "$1" ] || return 0
  read -r -a words <<<"$line"
  case ${words[0]-} in
    */env) [ ${#words[@]} -eq 2 ] && printf '%s\n' "${words[1]}" ;;
    */python*) printf '%s\n' "${words[0]}" ;;
  esac
  return 0
}

kt_elastic_command() {
  local python=$1 lib=$2 min=$3 max=$4 slots=$5 own=$6 iface=$7 wait=$8 port=$9 key=${10} pod_names=() name discovery
  read -r -a pod_names <<<"${11}"
  shift 11
  # Horovod runs the discovery through a shell.
  printf -v discovery '%q %q' "$python" "$lib/discover_hosts.py"
  KT_ELASTIC_ARGV=(env)
  for name in "${KT_LAUNCHER_ONLY_ENV[@]}" "${pod_names[@]+"${pod_names[@]}"}"; do KT_ELASTIC_ARGV+=(-u "$name"); done
  KT_ELASTIC_ARGV+=("$python" "$lib/horovodrun.py" -np "$((min * slots + own))" --min-np "$((min * slots + own))"
    --max-np "$((max * slots + own))" --host-discovery-script "$discovery")
  # The workers' Gloo uses this interface too; without one Horovod probes every host's interfaces first.
  [ -n "$iface" ] && KT_ELASTIC_ARGV+=(--network-interface "$iface")
  KT_ELASTIC_ARGV+=(--blacklist-cooldown-range "${KT_BLACKLIST_COOLDOWN[@]}" --elastic-timeout "$wait"
    --ssh-port "$port" --ssh-identity-file "$key" --gloo "$@")
}
