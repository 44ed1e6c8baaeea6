#!/usr/bin/env bash
# Builds the stand-in for registry:2 that the kind tier's registry runs (./Dockerfile), as
# kubetrain-test/registry:<hash of this directory's inputs>, unless it exists. Prints its name.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
"$repo/.ci/docker-engine"
"$repo/.ci/base-images" python:3.11-slim-bookworm >&2
name="kubetrain-test/registry:$(cat "$here/Dockerfile" "$here/config.yml" "$here/build.sh" | sha256sum | cut -c1-12)"
if ! docker image inspect "$name" >/dev/null 2>&1; then
  docker build --quiet --tag "$name" "$here" >&2
fi
echo "$name"
