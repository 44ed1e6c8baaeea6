# shellcheck shell=bash
# Starts one rank with its own pod's values of KUBETRAIN_POD_ENV: `bash pod-env.sh COMMAND...`, run by the MPI or
# horovodrun on each host in place of the training command when the job has such entries.
# The kubelet resolves a fieldRef or resourceFieldRef entry per pod, so the launcher's value is wrong on the other
# pods; and horovodrun writes the environment it forwards into each rank's command line, where a secretKeyRef's
# value must never be. The launcher forwards none of these names. Each pod's entrypoint saved its own values
# (kt_save_pod_env, lib/common.sh) in KT_POD_ENV_FILE before it started sshd or the MPI; this script gives them to
# the rank. The file is the pod's own: a worker's ssh session gets KT_POD_ENV_FILE from its sshd, the launcher's own
# ranks from the launcher (horovodrun's copy of it is left out: then HOME is the launcher's).
saved=${KT_POD_ENV_FILE:-$HOME/.kubetrain/pod-env}
if [ -r "$saved" ]; then
  # shellcheck source=/dev/null
  . "$saved"
fi
exec "$@"
