module kubetrain.dev/ci/runc-wrapper

go 1.24

require github.com/moby/sys/capability v0.5.0
