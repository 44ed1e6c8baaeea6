# Shared by the `worker` and `launcher` entrypoints (sourced, not run).
#
# Prepares what both sides of an ssh connection need, for any uid:
#   kt_prepare_home   HOME must be writable (an arbitrary uid often gets HOME=/); falls back to $TMPDIR.
#   kt_ensure_user    ssh and sshd look the uid up in /etc/passwd. An arbitrary uid gets an entry: appended to
#                     /etc/passwd when it is writable (the base image leaves it writable by group 0), else in a
#                     private copy served by nss_wrapper (LD_PRELOAD, for a read-only root filesystem).
#   kt_copy_ssh_files copies the Secret mounted at KUBETRAIN_SSH_DIR to $HOME/.ssh with the modes ssh insists on
#                     (kubelet mounts it read-only, owned by root and with modes a private key must not have).
# Reads: KUBETRAIN_SSH_DIR (default /etc/kubetrain/ssh), KUBETRAIN_SSH_PORT (default 2222).
# Sets:  KT_SSH_DIR (the writable copy), KT_PORT.

KT_ROLE=${KT_ROLE:-entrypoint}

kt_log() { printf 'kubetrain %s: %s\n' "$KT_ROLE" "$*" >&2; }

# kt_die MESSAGE [EXIT_CODE]: configuration errors exit 2 unless told otherwise.
kt_die() { kt_log "error: $1"; exit "${2:-2}"; }

kt_prepare_home() {
  if [ -z "${HOME:-}" ] || [ "$HOME" = / ] || ! { mkdir -p "$HOME" 2>/dev/null && [ -w "$HOME" ]; }; then
    local fallback="${TMPDIR:-/tmp}/kubetrain-home-$(id -u)"
    mkdir -p "$fallback" && chmod 0700 "$fallback" || kt_die "HOME ($HOME) is not writable and neither is $fallback"
    kt_log "HOME (${HOME:-unset}) is not writable; using $fallback"
    export HOME=$fallback
  fi
}

kt_ensure_user() {
  local uid gid entry wrapper="" candidate
  uid=$(id -u) gid=$(id -g)
  if getent passwd "$uid" >/dev/null 2>&1; then return 0; fi
  entry="kubetrain-$uid:x:$uid:$gid:kubetrain:$HOME:/bin/bash"
  if [ -w /etc/passwd ]; then
    printf '%s\n' "$entry" >>/etc/passwd
    kt_log "added uid $uid to /etc/passwd as kubetrain-$uid"
    return 0
  fi
  for candidate in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    if [ -e "$candidate" ]; then wrapper=$candidate && break; fi
  done
  [ -n "$wrapper" ] || kt_die "uid $uid has no /etc/passwd entry, /etc/passwd is read-only and nss_wrapper is not \
installed; ssh needs one: run as uid 1000 (the image's user) or install libnss-wrapper"
  mkdir -p "$HOME/.kubetrain"
  { cat /etc/passwd; printf '%s\n' "$entry"; } >"$HOME/.kubetrain/passwd"
  { cat /etc/group; getent group "$gid" >/dev/null || printf 'kubetrain-%s:x:%s:\n' "$gid" "$gid"; } \
    >"$HOME/.kubetrain/group"
  # Exported: sshd, ssh and every session they start (worker: through SetEnv) resolve the uid through the copy.
  export LD_PRELOAD="$wrapper${LD_PRELOAD:+ $LD_PRELOAD}" NSS_WRAPPER_PASSWD="$HOME/.kubetrain/passwd" \
    NSS_WRAPPER_GROUP="$HOME/.kubetrain/group"
  kt_log "uid $uid is not in the read-only /etc/passwd; serving it as kubetrain-$uid through nss_wrapper"
}

kt_copy_ssh_files() {
  local source=${KUBETRAIN_SSH_DIR:-/etc/kubetrain/ssh} name
  KT_PORT=${KUBETRAIN_SSH_PORT:-2222}
  KT_SSH_DIR="$HOME/.ssh"
  [ -d "$source" ] || kt_die "KUBETRAIN_SSH_DIR=$source does not exist (the job's <name>-ssh Secret is not mounted)"
  mkdir -p "$KT_SSH_DIR" && chmod 0700 "$KT_SSH_DIR" || kt_die "cannot create $KT_SSH_DIR"
  for name in "$@"; do
    [ -r "$source/$name" ] || kt_die "$source/$name is missing or unreadable by uid $(id -u) (Secret key $name;\
 for a non-root uid the pod needs fsGroup so the 0400 Secret files are group-readable)"
    # cat follows kubelet's ..data symlinks; a fresh file gets our uid, then the mode ssh requires.
    rm -f "$KT_SSH_DIR/$name"
    (umask 077 && cat "$source/$name" >"$KT_SSH_DIR/$name") || kt_die "cannot write $KT_SSH_DIR/$name"
    chmod 0600 "$KT_SSH_DIR/$name"
  done
}
