#!/usr/bin/env bash
# Builds every kubetrain image into the local Docker engine (`make images`): kubetrain/base, kubetrain/operator,
# kubetrain/entrypoints (what every job pod runs, copied in by an init container) and one image per training program
# (each package under jobs/ with a job.yaml, e.g. kubetrain/cifar-mixup), tagged with the chart's appVersion. Then the
# GPU variants of base and of each program: the same names with -gpu after the tag (kubetrain/cifar-mixup:0.1.0-gpu,
# the rule of jobs/trainlib/gpus.py), from images/base's VARIANT=gpu (TensorFlow with the CUDA 12.2 wheels).
# Starts the engine and makes the public base image available first (.ci/docker-engine, .ci/base-images), and puts
# the Horovod wheel .ci/setup built on this machine into the base image's context (images/base/wheels/) so Horovod is
# compiled once per machine for the CPU images. Docker's layer cache does the rest: a change in jobs/ rebuilds only
# the program layers.
# Prints one line per image: name, build seconds, size.
# With --registry R, each image is also tagged R/kubetrain/<name>:<tag>; with --push too, those tags are pushed to R
# (`docker login R` first where it needs one). The chart's imageRegistry=R then pulls the operator and entrypoints from
# there, and a job names its image R/kubetrain/<program>:<tag>.
# Usage: images/build.sh [--registry R [--push]] [image...]   (default: all; names as in images/, e.g. base operator
#        cifar_mixup, and -gpu after one for its GPU variant: base-gpu cifar_mixup-gpu)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
registry="" push=0
while [ $# -gt 0 ]; do
  case $1 in
    --registry) registry=${2:?--registry needs a registry, e.g. localhost:5001}; registry=${registry%/}; shift 2 ;;
    --push) push=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "images: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ "$push" = 1 ] && [ -z "$registry" ]; then
  echo "images: --push needs --registry R: the registry to push to (e.g. --registry localhost:5001)" >&2
  exit 2
fi
"$repo/.ci/docker-engine"
"$repo/.ci/base-images"

tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/kubetrain/Chart.yaml)
# the training programs: each package under jobs/ that ships a job.yaml
programs=()
for job in jobs/*/job.yaml; do programs+=("$(basename "$(dirname "$job")")"); done
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(base operator entrypoints "${programs[@]}" base-gpu "${programs[@]/%/-gpu}")

rm -f images/base/wheels/*.whl
if [ -d .venv/wheels ] && compgen -G ".venv/wheels/horovod-*.whl" >/dev/null; then
  cp .venv/wheels/horovod-*.whl images/base/wheels/
fi

build() { # build IMAGE: images/<dir>/Dockerfile as kubetrain/<dir with - for _>:<tag>; IMAGE <dir>-gpu: <tag>-gpu
  local dir=${1%-gpu} variant="" start=$SECONDS args=()
  [ "$1" = "$dir" ] || variant=-gpu
  local name="kubetrain/${dir//_/-}:$tag$variant"
  case $dir in
    base) [ -z "$variant" ] || args=(--build-arg VARIANT=gpu) ;;
    operator | entrypoints) ;;
    *) args=(--build-arg "BASE_IMAGE=kubetrain/base:$tag$variant") ;;
  esac
  if ! docker build --quiet --file "images/$dir/Dockerfile" --tag "$name" "${args[@]}" . >/tmp/kubetrain-build-$$.log 2>&1
  then
    tail -n 60 /tmp/kubetrain-build-$$.log >&2
    echo "images: FAILED: docker build -f images/$dir/Dockerfile -t $name ${args[*]} ." >&2
    exit 1
  fi
  rm -f /tmp/kubetrain-build-$$.log
  printf 'images: %-32s %4ss  %s\n' "$name" "$((SECONDS - start))" \
    "$(docker image inspect --format '{{.Size}}' "$name" | numfmt --to=si --suffix=B)"
  [ -n "$registry" ] || return 0
  docker tag "$name" "$registry/$name"
  if [ "$push" = 1 ]; then
    start=$SECONDS
    if ! docker push --quiet "$registry/$name" >/tmp/kubetrain-push-$$.log 2>&1; then
      tail -n 20 /tmp/kubetrain-push-$$.log >&2
      echo "images: FAILED: docker push $registry/$name" >&2
      exit 1
    fi
    rm -f /tmp/kubetrain-push-$$.log
    printf 'images: %-32s %4ss  pushed\n' "$registry/$name" "$((SECONDS - start))"
  fi
}
for image in "${wanted[@]}"; do
  dir=${image%-gpu}
  [ -f "images/$dir/Dockerfile" ] || { echo "images: no images/$dir/Dockerfile" >&2; exit 2; }
  case $image in operator-gpu | entrypoints-gpu) echo "images: $dir has no GPU variant" >&2; exit 2 ;; esac
  build "$image"
done
