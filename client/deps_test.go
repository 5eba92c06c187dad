package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules are the only modules outside the standard library the
// client may import: a websocket library for the stream. Nothing of the
// marketdata module: importing the client must not pull in server code.
var allowedModules = []string{
	"github.com/gorilla/websocket",
	"github.com/coder/websocket",
	"github.com/fasthttp/websocket",
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
