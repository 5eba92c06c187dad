package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules are the only modules outside the standard library the
// client may import: the stream's WebSocket library, which has no
// dependencies of its own. Nothing of the marketdata module: importing the
// client must not pull in server code (or fasthttp, which the server's
// WebSocket library brings).
var allowedModules = []string{
	"github.com/coder/websocket",
}

// TestDependencies lists the client package's dependencies (its tests
// excluded) with `go list -deps`.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not in PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/marketdata/marketdata/client" {
			continue
		}
		allowed := false
		for _, m := range allowedModules {
			allowed = allowed || pkg == m || strings.HasPrefix(pkg, m+"/")
		}
		if !allowed {
			t.Errorf("the client depends on %s: only the standard library and %v are allowed", pkg, allowedModules)
		}
	}
}
