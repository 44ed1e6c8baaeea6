# shellcheck shell=bash
# Sourced by the Go builds (tests/controlplane/build.sh, tests/bench/peer/build.sh): Go's module and build caches
# live in the kubetrain cache (shared between builds and keys), never in the repository; pinned toolchain, static.
cache=${KUBETRAIN_CACHE:-$HOME/.cache/kubetrain}
export GOPATH="$cache/go/path" GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/path/pkg/mod"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0 GO111MODULE=on
