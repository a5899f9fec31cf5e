package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"

	criserver "github.com/evjournal/containerd/cri/server"
)

// runtimeHandlerUsage is --cri-runtime-handler's help.
const runtimeHandlerUsage = "NAME=RUNTIME[,ARG...]: a CRI runtime handler (a RuntimeClass's handler) whose pods run through the OCI runtime " +
	"RUNTIME with the global args ARG (e.g. crun=/usr/bin/crun,--root=/run/crun-k8s; repeatable). The default handler \"\" is --runtime"

// handlerName is a RuntimeClass's handler: Kubernetes takes a lowercase
// RFC 1123 label.
var handlerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// parseRuntimeHandlers reads --cri-runtime-handler values: NAME=RUNTIME
// followed by the runtime's global args, comma-separated (an arg cannot
// hold a comma). The runtime is found at start (resolveRuntimeHandlers).
func parseRuntimeHandlers(values []string) ([]criserver.RuntimeHandler, error) {
	var out []criserver.RuntimeHandler
	seen := map[string]bool{}
	for _, v := range values {
		name, rest, ok := strings.Cut(v, "=")
		fields := strings.Split(rest, ",")
		switch {
		case !ok || fields[0] == "":
			return nil, fmt.Errorf("--cri-runtime-handler %q: want NAME=RUNTIME[,ARG...], e.g. crun=/usr/bin/crun,--root=/run/crun-k8s", v)
		case !handlerName.MatchString(name):
			return nil, fmt.Errorf("--cri-runtime-handler %q: the name %q is not a lowercase RFC 1123 label (a RuntimeClass's handler; "+
				"the default handler \"\" is --runtime)", v, name)
		case seen[name]:
			return nil, fmt.Errorf("--cri-runtime-handler %q: handler %q given twice", v, name)
		case containsEmpty(fields[1:]):
			return nil, fmt.Errorf("--cri-runtime-handler %q: an empty runtime arg (two commas, or one at the end)", v)
		}
		seen[name] = true
		out = append(out, criserver.RuntimeHandler{Name: name, Runtime: fields[0], Args: fields[1:]})
	}
	return out, nil
}

func containsEmpty(l []string) bool {
	for _, s := range l {
		if s == "" {
			return true
		}
	}
	return false
}

// resolveRuntimeHandlers finds each handler's runtime as --runtime's
// default is found (a bare name beside this daemon's executable first,
// then on PATH) and refuses one that is not there: a pod of that
// RuntimeClass could never start.
func resolveRuntimeHandlers(hs []criserver.RuntimeHandler, exeDir string) ([]criserver.RuntimeHandler, error) {
	out := make([]criserver.RuntimeHandler, len(hs))
	for i, h := range hs {
		h.Runtime, _ = chooseBinary(h.Runtime, false, exeDir)
		path, err := exec.LookPath(h.Runtime)
		if err != nil {
			return nil, fmt.Errorf("--cri-runtime-handler %s: runtime %w", h.Name, err)
		}
		h.Runtime = path
		out[i] = h
	}
	return out, nil
}
