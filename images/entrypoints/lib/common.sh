# shellcheck shell=bash
# Shared by the worker and launcher entrypoints (sourced by lib/worker.sh and lib/launcher.sh, not run).
#
# Prepares what both sides of an ssh connection need, for any uid and any image:
#   kt_require        a tool the image must have: exits 2 with one line naming the image and what to install.
#   kt_prepare_home   HOME must be writable (an arbitrary uid often gets HOME=/); falls back to $TMPDIR.
#   kt_ensure_user    ssh and sshd look the uid up in /etc/passwd. An uid without an entry gets one: appended to
#                     /etc/passwd when it is writable, else in a private copy served by nss_wrapper (LD_PRELOAD): the
#                     image's own libnss_wrapper, or the one shipped beside these scripts when it loads in this image.
#   kt_passwd_home    the home of the uid's passwd entry: where ssh looks for ~/.ssh/config, whatever $HOME says.
#   kt_copy_ssh_files copies the Secret mounted at KUBETRAIN_SSH_DIR to $HOME/.ssh with the modes ssh insists on
#                     (kubelet mounts it read-only, owned by root and with modes a private key must not have).
#   kt_save_pod_env   saves this pod's values of KUBETRAIN_POD_ENV for lib/pod-env.sh, which starts every rank.
#   kt_check_gpus     a pod whose ranks hold GPUs exits 2 when nvidia-smi lists fewer than a rank holds.
# Reads: KUBETRAIN_SSH_DIR (default /etc/kubetrain/ssh), KUBETRAIN_SSH_PORT (default 2222), KUBETRAIN_IMAGE (the
#        pod's image, named in messages), KUBETRAIN_GPUS_PER_RANK (default 0).
# Sets:  KT_SSH_DIR (the writable copy), KT_PORT, KT_LIB (this folder).

KT_ROLE=${KT_ROLE:-entrypoint}
KT_LIB=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
KT_IMAGE=${KUBETRAIN_IMAGE:-this image}

kt_log() { printf 'kubetrain %s: %s\n' "$KT_ROLE" "$*" >&2; }

# kt_die MESSAGE [EXIT_CODE]: configuration errors exit 2 unless told otherwise.
kt_die() { kt_log "error: $1"; exit "${2:-2}"; }

# kt_require PROGRAM PACKAGE: PROGRAM must be on PATH (sbin folders included, where Debian puts sshd).
kt_require() {
  PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1 ||
    kt_die "$1 not found in image $KT_IMAGE: install $2"
}

kt_prepare_home() {
  if [ -z "${HOME:-}" ] || [ "$HOME" = / ] || ! { mkdir -p "$HOME" 2>/dev/null && [ -w "$HOME" ]; }; then
    local fallback
    fallback="${TMPDIR:-/tmp}/kubetrain-home-$(id -u)"
    { mkdir -p "$fallback" && chmod 0700 "$fallback"; } ||
      kt_die "HOME ($HOME) is not writable and neither is $fallback"
    kt_log "HOME (${HOME:-unset}) is not writable; using $fallback"
    export HOME=$fallback
  fi
}

# kt_has_entry FILE ID: FILE (passwd or group format) has a line for the numeric ID.
kt_has_entry() {
  local name _password id rest
  while IFS=: read -r name _password id rest; do
    [ "$id" = "$2" ] && return 0
  done <"$1"
  return 1
}

# kt_passwd_home: the home folder of this uid's passwd entry (nss_wrapper's copy when it serves the uid).
kt_passwd_home() {
  local name _password id _gid _gecos home _shell uid
  uid=$(id -u)
  while IFS=: read -r name _password id _gid _gecos home _shell; do
    [ "$id" = "$uid" ] && printf '%s\n' "$home" && return 0
  done <"${NSS_WRAPPER_PASSWD:-/etc/passwd}"
  return 1
}

# kt_nss_wrapper: prints the first libnss_wrapper that loads in this image (the image's, then ours).
kt_nss_wrapper() {
  local candidate
  for candidate in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so \
    "$KT_LIB/libnss_wrapper.so"; do
    [ -e "$candidate" ] || continue
    # ld.so reports a library it cannot preload (another C library, a too old glibc) and goes on without it.
    if [ -z "$(LD_PRELOAD=$candidate /bin/sh -c : 2>&1)" ]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

kt_ensure_user() {
  local uid gid entry wrapper
  uid=$(id -u) gid=$(id -g)
  if kt_has_entry /etc/passwd "$uid"; then return 0; fi
  entry="kubetrain-$uid:x:$uid:$gid:kubetrain:$HOME:/bin/bash"
  if [ -w /etc/passwd ]; then
    printf '%s\n' "$entry" >>/etc/passwd
    kt_log "added uid $uid to /etc/passwd as kubetrain-$uid"
    return 0
  fi
  wrapper=$(kt_nss_wrapper) || kt_die "uid $uid has no entry in the read-only /etc/passwd of image $KT_IMAGE and \
nss_wrapper does not load there: add the user to the image (useradd --uid $uid) or install libnss-wrapper"
  mkdir -p "$HOME/.kubetrain"
  { cat /etc/passwd; printf '%s\n' "$entry"; } >"$HOME/.kubetrain/passwd"
  { cat /etc/group; kt_has_entry /etc/group "$gid" || printf 'kubetrain-%s:x:%s:\n' "$gid" "$gid"; } \
    >"$HOME/.kubetrain/group"
  # Exported: sshd, ssh and every session they start (worker: through SetEnv) resolve the uid through the copy.
  export LD_PRELOAD="$wrapper${LD_PRELOAD:+ $LD_PRELOAD}" NSS_WRAPPER_PASSWD="$HOME/.kubetrain/passwd" \
    NSS_WRAPPER_GROUP="$HOME/.kubetrain/group"
  kt_log "uid $uid is not in the read-only /etc/passwd; serving it as kubetrain-$uid through nss_wrapper ($wrapper)"
}

kt_copy_ssh_files() {
  local source=${KUBETRAIN_SSH_DIR:-/etc/kubetrain/ssh} name
  # shellcheck disable=SC2034 # read by worker.sh and launcher.sh
  KT_PORT=${KUBETRAIN_SSH_PORT:-2222}
  KT_SSH_DIR="$HOME/.ssh"
  [ -d "$source" ] || kt_die "KUBETRAIN_SSH_DIR=$source does not exist (the job's <name>-ssh Secret is not mounted)"
  { mkdir -p "$KT_SSH_DIR" && chmod 0700 "$KT_SSH_DIR"; } || kt_die "cannot create $KT_SSH_DIR"
  for name in "$@"; do
    [ -r "$source/$name" ] || kt_die "$source/$name is missing or unreadable by uid $(id -u) (Secret key $name;\
 for a non-root uid the pod needs fsGroup so the 0400 Secret files are group-readable)"
    # cat follows kubelet's ..data symlinks; a fresh file gets our uid, then the mode ssh requires.
    rm -f "$KT_SSH_DIR/$name"
    (umask 077 && cat "$source/$name" >"$KT_SSH_DIR/$name") || kt_die "cannot write $KT_SSH_DIR/$name"
    chmod 0600 "$KT_SSH_DIR/$name"
  done
}

# kt_save_pod_env: KUBETRAIN_POD_ENV names the job's env entries whose value is this pod's own (fieldRef,
# resourceFieldRef, secretKeyRef). Their values go to $HOME/.kubetrain/pod-env (HOME is the pod's own emptyDir),
# readable by this uid only, as bash assignments: any character survives, and no value is on a command line.
# KT_POD_ENV_FILE, exported, names the file: the worker's ssh sessions get it (SetEnv), the launcher's own ranks
# inherit it.
kt_save_pod_env() {
  local name
  export KT_POD_ENV_FILE="$HOME/.kubetrain/pod-env"
  mkdir -p "${KT_POD_ENV_FILE%/*}" || kt_die "cannot create ${KT_POD_ENV_FILE%/*}"
  (
    umask 077
    for name in ${KUBETRAIN_POD_ENV:-}; do
      if [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ -n "${!name+set}" ]; then
        printf 'export %s=%q\n' "$name" "${!name}"
      fi
    done >"$KT_POD_ENV_FILE"
  ) || kt_die "cannot write $KT_POD_ENV_FILE"
}

# kt_check_gpus: KUBETRAIN_GPUS_PER_RANK says how many GPUs each rank of this pod holds. nvidia-smi, which the NVIDIA
# container runtime mounts beside the GPUs, must list at least that many. Without nvidia-smi nothing is checked: the
# program must check that its framework sees them (docs/gpus.md). This catches GPUs that never reached the container,
# not a framework built for CPUs only.
kt_check_gpus() {
  local wanted=${KUBETRAIN_GPUS_PER_RANK:-0} out listed
  [[ $wanted =~ ^[0-9]+$ ]] || kt_die "KUBETRAIN_GPUS_PER_RANK='$wanted' must be a whole number"
  [ "$wanted" -gt 0 ] || return 0
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    kt_log "no nvidia-smi in image $KT_IMAGE: not checking that each rank sees its $wanted GPU(s)"
    return 0
  fi
  out=$(nvidia-smi -L 2>&1) || kt_die "each rank holds $wanted GPU(s) and nvidia-smi -L fails in image $KT_IMAGE: \
${out%%$'\n'*}"
  # a MIG slice is listed under its GPU, indented: count both, so a pod given slices of one GPU passes
  listed=$(printf '%s\n' "$out" | grep -cE '^(GPU| +MIG) ' || true)
  [ "$listed" -ge "$wanted" ] || kt_die "each rank holds $wanted GPU(s) and nvidia-smi lists $listed in image \
$KT_IMAGE: the node's NVIDIA container runtime did not pass them to the container"
}
