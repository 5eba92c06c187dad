package k8s

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the manifests are checked against is read from the binary's own
// source, where each value has its one home (docs/configuration.md): the
// command is package main, so its values cannot be imported. A change of
// shape there fails these readers with the file and what they looked for.

const cmdDir = "../../cmd/marketdata/"

// binaryVar is one variable of envTable (cmd/marketdata/envtable.go).
type binaryVar struct {
	def       string // the literal default; "" when none or computed
	noDefault string
	readers   map[string]bool // forAPI, forIngest, ...
}

// readerOf maps a subcommand to the envTable reader constant of the
// variables it reads.
var readerOf = map[string]string{"api": "forAPI", "ingest": "forIngest"}

// migrateReads is what `marketdata migrate` uses of its configuration:
// cfg.DatabaseURL alone (cmd/marketdata/migrate.go). envTable has no
// reader for it.
var migrateReads = map[string]bool{"MD_DATABASE_URL": true}

// goRuntimeVars are read by the Go runtime (and GOGC by tuneAPIGC), not by
// LoadConfig.
var goRuntimeVars = map[string]bool{"GOMEMLIMIT": true, "GOGC": true, "GOMAXPROCS": true}

// parseFile parses one Go file of the binary.
func parseFile(t *testing.T, path string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return f
}

// funcDecl finds a top-level function by name.
func funcDecl(t *testing.T, f *ast.File, path, name string) *ast.FuncDecl {
	t.Helper()
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Recv == nil {
			return fd
		}
	}
	t.Fatalf("%s: no func %s", path, name)
	return nil
}

// stringLit is the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// binaryEnv reads envTable: every variable of contract §1 with its literal
// default and the commands that read it.
func binaryEnv(t *testing.T) map[string]binaryVar {
	t.Helper()
	path := cmdDir + "envtable.go"
	fd := funcDecl(t, parseFile(t, path), path, "envTable")
	vars := map[string]binaryVar{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		var name string
		v := binaryVar{readers: map[string]bool{}}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := kv.Key.(*ast.Ident)
			if key == nil {
				continue
			}
			switch key.Name {
			case "name":
				name, _ = stringLit(kv.Value)
			case "def":
				v.def, _ = stringLit(kv.Value)
			case "noDefault":
				v.noDefault, _ = stringLit(kv.Value)
			case "readers":
				ast.Inspect(kv.Value, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						v.readers[id.Name] = true
					}
					return true
				})
			}
		}
		if strings.HasPrefix(name, "MD_") {
			vars[name] = v
		}
		return true
	})
	for _, name := range []string{"MD_HTTP_ADDR", "MD_ADMIN_ADDR", "MD_DATABASE_URL", "MD_CURSOR_SECRET"} {
		if _, ok := vars[name]; !ok {
			t.Fatalf("%s: envTable has no %s (read %d variables): has its shape changed?", path, name, len(vars))
		}
	}
	for cmd, reader := range readerOf {
		found := false
		for _, v := range vars {
			found = found || v.readers[reader]
		}
		if !found {
			t.Fatalf("%s: no variable is read by %s (%s)", path, reader, cmd)
		}
	}
	return vars
}

// adminRoutes reads the paths the admin server serves (startAdminOn's
// mux in cmd/marketdata/admin.go): "GET /readyz" gives /readyz.
func adminRoutes(t *testing.T) map[string]bool {
	t.Helper()
	path := cmdDir + "admin.go"
	fd := funcDecl(t, parseFile(t, path), path, "startAdminOn")
	routes := map[string]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
			return true
		}
		if pattern, ok := stringLit(call.Args[0]); ok {
			if method, p, found := strings.Cut(pattern, " "); found && method == "GET" {
				pattern = p
			}
			routes[pattern] = true
		}
		return true
	})
	if !routes["/readyz"] {
		t.Fatalf("%s: startAdminOn serves %v, no /readyz: has its shape changed?", path, routes)
	}
	return routes
}

// shutdownBudget reads the deadline a command gives its shutdown: the one
// context.WithTimeout(context.Background(), N*time.Second) in fn.
func shutdownBudget(t *testing.T, file, fn string) time.Duration {
	t.Helper()
	path := cmdDir + file
	fd := funcDecl(t, parseFile(t, path), path, fn)
	var found []time.Duration
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isSelector(call.Fun, "context", "WithTimeout") || len(call.Args) != 2 {
			return true
		}
		if parent, ok := call.Args[0].(*ast.CallExpr); !ok || !isSelector(parent.Fun, "context", "Background") {
			return true
		}
		d, ok := durationLit(call.Args[1])
		if !ok {
			t.Fatalf("%s: %s: the shutdown deadline is not N*time.Unit: read it by hand and update this reader", path, fn)
		}
		found = append(found, d)
		return true
	})
	if len(found) != 1 {
		t.Fatalf("%s: %s: %d shutdown deadlines (context.WithTimeout(context.Background(), …)), want 1", path, fn, len(found))
	}
	return found[0]
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// durationLit evaluates N*time.Second, time.Second and the like.
func durationLit(e ast.Expr) (time.Duration, bool) {
	n, unitExpr := 1, e
	if bin, ok := e.(*ast.BinaryExpr); ok {
		lit, ok := bin.X.(*ast.BasicLit)
		if bin.Op != token.MUL || !ok || lit.Kind != token.INT {
			return 0, false
		}
		var err error
		if n, err = strconv.Atoi(lit.Value); err != nil {
			return 0, false
		}
		unitExpr = bin.Y
	}
	units := map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute}
	for name, unit := range units {
		if isSelector(unitExpr, "time", name) {
			return time.Duration(n) * unit, true
		}
	}
	return 0, false
}

// ingestBatchBudget reads how long an ingest applier may still take over
// the batch in hand once the worker stops (ingest/process.go): the batch
// deadline, const batchTimeout, and the pause after a failed batch, the
// cap in process's time.Sleep(min(delay, cap)). The ack wait bounds no
// batch: the worker sends progress acks for what it holds.
func ingestBatchBudget(t *testing.T) time.Duration {
	t.Helper()
	const path = "../../ingest/process.go"
	f := parseFile(t, path)
	var timeout time.Duration
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name == "batchTimeout" && i < len(vs.Values) {
					timeout, _ = durationLit(vs.Values[i])
				}
			}
		}
	}
	if timeout <= 0 {
		t.Fatalf("%s: no const batchTimeout = N*time.Unit: read the batch deadline by hand and update this reader", path)
	}
	var process *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "process" && fd.Recv != nil {
			process = fd
		}
	}
	if process == nil {
		t.Fatalf("%s: no method process", path)
	}
	var pauses []time.Duration
	ast.Inspect(process.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isSelector(call.Fun, "time", "Sleep") {
			return true
		}
		capped, ok := call.Args[0].(*ast.CallExpr)
		if ok {
			id, isIdent := capped.Fun.(*ast.Ident)
			ok = isIdent && id.Name == "min" && len(capped.Args) == 2
		}
		if !ok {
			t.Fatalf("%s: process's time.Sleep is not min(delay, N*time.Unit): read the pause by hand and update this reader", path)
		}
		d, ok := durationLit(capped.Args[1])
		if !ok {
			t.Fatalf("%s: process's pause is not capped by N*time.Unit: read it by hand and update this reader", path)
		}
		pauses = append(pauses, d)
		return true
	})
	if len(pauses) != 1 {
		t.Fatalf("%s: process has %d time.Sleep pauses, want 1", path, len(pauses))
	}
	return timeout + pauses[0]
}

// dockerExposed reads the ports deploy/Dockerfile's EXPOSE lines name.
func dockerExposed(t *testing.T) map[int32]bool {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	ports := map[int32]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "EXPOSE ")
		if !ok {
			continue
		}
		for _, p := range strings.Fields(rest) {
			p, _, _ = strings.Cut(p, "/")
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				t.Fatalf("Dockerfile: EXPOSE %q", rest)
			}
			ports[int32(n)] = true
		}
	}
	return ports
}

// listenAddr splits a host:port variable the way the binary accepts it
// (an empty host listens on every interface).
func listenAddr(t *testing.T, name, v string) (host string, port int32) {
	t.Helper()
	h, p, err := net.SplitHostPort(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: a fixed port is needed for probes and Services", name, v)
	}
	return h, int32(n)
}
