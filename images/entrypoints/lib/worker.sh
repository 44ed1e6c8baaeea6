#!/usr/bin/env bash
# kubetrain worker: an sshd the launcher's MPI starts ranks through. No arguments. Run by ../worker, which checks that
# the image has bash; the image needs sshd (openssh-server) and ssh-keygen, nothing else of kubetrain's.
#
# 0. checks that nvidia-smi, when the image has it, lists the GPUs each rank holds (kt_check_gpus, lib/common.sh);
# 1. copies authorized_keys and the job's host key from KUBETRAIN_SSH_DIR (the keys of Secret <name>-ssh a worker
#    mounts; never the private key the launcher logs in with) into a writable $HOME/.ssh (any uid);
# 2. writes its own sshd_config in $HOME/.kubetrain/sshd (nothing under /etc is touched). The host key is the job's,
#    which the launcher's known_hosts pins; a Secret without one (written before host keys were pinned) gets a fresh
#    host key, which that launcher does not check;
# 3. execs `sshd -D -e` on KUBETRAIN_SSH_PORT (default 2222) in the foreground, logging to stderr.
# Works without root: a non-root sshd can only log in its own user, which is the user the launcher connects as.
# Public-key logins only (the job's own key in authorized_keys); no passwords, no PAM.
# Sessions get the container's environment through SetEnv (the image's ENV, the job's env, nss_wrapper's variables for
# an uid missing from a read-only /etc/passwd), less what belongs to one shell or host (HOME, HOSTNAME, ...), so the
# MPI's daemon (orted, prted, hydra_pmi_proxy) and an interactive `ssh` for debugging see the job's environment.
# Exit codes: 2 = bad configuration (message says which file or variable); otherwise sshd's.
set -euo pipefail
KT_ROLE=worker
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${BASH_SOURCE[0]%/*}/common.sh"

kt_require sshd openssh-server
kt_require ssh-keygen openssh-client
kt_check_gpus
kt_prepare_home
kt_ensure_user
kt_save_pod_env
kt_copy_ssh_files authorized_keys

sshd_bin=$(PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v sshd)
run_dir="$HOME/.kubetrain/sshd"
mkdir -p "$run_dir" && chmod 0700 "$run_dir"
rm -f "$run_dir"/ssh_host_ed25519_key*
if [ -e "${KUBETRAIN_SSH_DIR:-/etc/kubetrain/ssh}/ssh_host_ed25519_key" ]; then
  kt_copy_ssh_files ssh_host_ed25519_key
  mv "$KT_SSH_DIR/ssh_host_ed25519_key" "$run_dir/ssh_host_ed25519_key"
else
  kt_log "the job's Secret has no host key: using a fresh one, which the launcher does not check"
  ssh-keygen -q -t ed25519 -N '' -C "kubetrain-worker" -f "$run_dir/ssh_host_ed25519_key"
fi
# A root sshd (privilege separation) needs its chroot directory; a non-root one does not use it.
if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd && chmod 0755 /run/sshd; fi

# SetEnv "NAME=value" for each exported variable of the container whose value sshd_config can quote safely.
session_env() {
  local name value
  for name in $(compgen -e); do
    case $name in HOME | HOSTNAME | PWD | OLDPWD | SHLVL | _ | USER | LOGNAME | SHELL | MAIL | TERM | SSH_*) continue ;; esac
    value=${!name}
    case $value in
      *'"'* | *\\* | *$'\n'*) kt_log "not setting $name in ssh sessions: its value has a quote, backslash or newline" ;;
      *) printf 'SetEnv "%s=%s"\n' "$name" "$value" ;;
    esac
  done
}

cat >"$run_dir/sshd_config" <<EOF
# Written by the kubetrain worker entrypoint at start; regenerated every start.
Port $KT_PORT
HostKey $run_dir/ssh_host_ed25519_key
PidFile $run_dir/sshd.pid
AuthorizedKeysFile $KT_SSH_DIR/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
PermitRootLogin prohibit-password
UsePAM no
# The files above are written by this script with 0600/0700 modes; HOME may sit under a world-writable parent
# (an arbitrary uid's fallback in /tmp) that StrictModes would reject.
StrictModes no
PrintMotd no
PrintLastLog no
UseDNS no
X11Forwarding no
AllowTcpForwarding no
# mpirun opens one connection per worker at once; leave room for many launchers' retries.
MaxStartups 100:30:200
$(session_env)
EOF

kt_log "starting sshd on port $KT_PORT as uid $(id -u) (HOME=$HOME)"
exec "$sshd_bin" -D -e -f "$run_dir/sshd_config" -p "$KT_PORT"
