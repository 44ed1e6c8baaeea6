// Command kubetrain-runc starts containers on hosts whose capability bounding set lacks capabilities that container
// engines grant by default (some sandboxed machines drop CAP_SYS_RESOURCE). It removes every capability this process
// cannot hold from the OCI process spec, turns a negative oomScoreAdj (which needs CAP_SYS_RESOURCE) into 0, and then
// execs the real runc with the arguments unchanged. Register it as the engine's default runtime (dockerd
// --add-runtime/--default-runtime, or containerd's runc BinaryName), or install it in runc's place with the real one
// beside it as <path>.real. On a host with a full bounding set it is not needed.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moby/sys/capability"
)

// flagsWithValue are runc's global flags (before the command) that take a value as the next argument.
var flagsWithValue = map[string]bool{"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true}

func main() {
	real := realRunc()
	args := os.Args[1:]
	if err := patch(args); err != nil {
		fmt.Fprintf(os.Stderr, "kubetrain-runc: %v\n", err)
		os.Exit(1)
	}
	if err := syscall.Exec(real, append([]string{real}, args...), os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "kubetrain-runc: exec %s: %v\n", real, err)
		os.Exit(1)
	}
}

// realRunc is $KUBETRAIN_REAL_RUNC, else this program's path + ".real" where that exists, else /usr/sbin/runc.
func realRunc() string {
	if path := os.Getenv("KUBETRAIN_REAL_RUNC"); path != "" {
		return path
	}
	if self, err := os.Executable(); err == nil {
		if _, err := os.Stat(self + ".real"); err == nil {
			return self + ".real"
		}
	}
	return "/usr/sbin/runc"
}

// patch edits the spec that the runc command in args will read: the bundle's config.json for create/run, the
// --process file for exec.
func patch(args []string) error {
	command, rest := splitCommand(args)
	switch command {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return edit(filepath.Join(bundle, "config.json"), func(spec map[string]any) {
			if process, ok := spec["process"].(map[string]any); ok {
				fixProcess(process)
			}
		})
	case "exec":
		if file := flagValue(rest, "--process", "-p"); file != "" {
			return edit(file, fixProcess)
		}
	}
	return nil
}

// splitCommand returns runc's command word and the arguments after it.
func splitCommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") {
			return arg, args[i+1:]
		}
		if flagsWithValue[arg] {
			i++
		}
	}
	return "", nil
}

// flagValue finds `--name value`, `--name=value` or `-n value` in args.
func flagValue(args []string, long, short string) string {
	for i, arg := range args {
		if strings.HasPrefix(arg, long+"=") {
			return strings.TrimPrefix(arg, long+"=")
		}
		if (arg == long || arg == short) && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// edit rewrites a JSON file through fn, keeping every field it does not touch (numbers stay exact).
func edit(path string, fn func(map[string]any)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var document map[string]any
	if err := decoder.Decode(&document); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fn(document)
	out, err := json.Marshal(document)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// fixProcess drops the capabilities this host cannot grant and a negative oomScoreAdj from an OCI process spec.
func fixProcess(process map[string]any) {
	missing := missingCapabilities()
	if sets, ok := process["capabilities"].(map[string]any); ok {
		for name, value := range sets {
			list, ok := value.([]any)
			if !ok {
				continue
			}
			kept := []any{}
			for _, item := range list {
				if s, ok := item.(string); !ok || !missing[s] {
					kept = append(kept, item)
				}
			}
			sets[name] = kept
		}
	}
	if adj, ok := process["oomScoreAdj"].(json.Number); ok && strings.HasPrefix(adj.String(), "-") {
		process["oomScoreAdj"] = json.Number("0")
	}
}

// missingCapabilities names (CAP_X) the known capabilities outside this process's bounding set.
func missingCapabilities() map[string]bool {
	missing := map[string]bool{}
	for _, c := range capability.ListKnown() {
		if held, err := capability.GetBound(c); err == nil && !held {
			missing["CAP_"+strings.ToUpper(c.String())] = true
		}
	}
	return missing
}
