package clustertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/internal/testenv"
)

// Topology addresses; deploy/local/cluster.sh owns the same numbers.
var (
	redisPorts    = []int{32001, 32002, 32003, 32004, 32005, 32006}
	natsPorts     = []int{32221, 32222, 32223}
	pgPrimaryPort = 32432
	pgReplicaPort = 32433
)

// Secrets of the suite's API nodes (test values, never a real key).
const (
	cursorSecret = "clustertest-cursor-secret-0123456789abcdef"
	keyPepper    = "clustertest-key-pepper-0123456789abcdefghij"
)

// suite is what TestMain set up and every test shares.
type suite struct {
	root    string // repository root
	dir     string // topology data, logs and binaries
	script  string // deploy/local/cluster.sh
	bin     string // bin/marketdata built once
	race    *raceBuild
	env     []string // MD_* variables pointing at the topology
	account string
	secret  string // key with markets:read and account:read
	apis    []*child
	ingests []*child
	lock    *os.File
}

// raceBuild is the -race binary, built in the background while the topology
// starts (it is the slowest build).
type raceBuild struct {
	path string
	done chan struct{}
	err  error
}

var (
	the *suite
	// skipReason is set when a binary the topology needs is missing.
	skipReason string
	// setupErr is set when the topology or the processes did not start.
	setupErr error
)

// cl returns the shared suite, or skips (fails in CI) the test when the
// topology could not be started for lack of binaries, or fails it when the
// setup broke.
func cl(t *testing.T) *suite {
	t.Helper()
	testenv.Integration(t, "the cluster topology of deploy/local/cluster.sh")
	switch {
	case skipReason != "":
		if os.Getenv("CI") == "true" {
			t.Fatalf("cluster suite required in CI: %s", skipReason)
		}
		t.Skipf("cluster suite skipped: %s", skipReason)
	case setupErr != nil:
		t.Fatalf("cluster suite setup: %v", setupErr)
	case the == nil:
		t.Fatalf("the cluster suite was not started for %s: add it to suiteTests", t.Name())
	}
	return the
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// suiteTests are the tests of the package; a -run that selects none of them
// (go test -run TestX ./...) does not start the topology.
var suiteTests = []string{
	"TestNATSStreamLeaderKilled", "TestReadsSameOnAllNodes", "TestRateLimitExactAcrossNodes",
	"TestCacheRebuildRaceOnCluster", "TestRedisMasterKilledUnderLoad", "TestReplicaStopped",
	"TestStreamsAcrossNodes", "TestStreamsRedisMasterKilled", "TestFailedAuthBlockAcrossNodes",
}

// selected reports whether this run may run one of the suite's tests.
func selected() bool {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	if err != nil {
		return true // go test reports the pattern
	}
	for _, name := range suiteTests {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// quiet drops go-redis' own log lines (a dial refused while a node is
// killed on purpose); the tests report what matters.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run(m *testing.M) int {
	redis.SetLogger(quiet{})
	// Under -short every test skips (cl): the topology is not started.
	if !selected() || testing.Short() {
		return m.Run()
	}
	if missing := missingBinaries(); len(missing) > 0 {
		skipReason = "missing " + strings.Join(missing, ", ") + " (apt-get install redis-server nats-server postgresql)"
		return m.Run()
	}
	// One topology per machine: a run in another worktree waits here, and a
	// topology left behind by a run that was killed is taken down first.
	lock, err := lockMachine()
	if err != nil {
		setupErr = err
		return m.Run()
	}
	defer lock.Close() //nolint:errcheck // closing releases the flock; what record wrote is already written
	s, err := setUp(lock)
	the, setupErr = s, err
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster suite setup failed: %v\n", err)
	}
	code := m.Run()
	if s != nil {
		s.tearDown(code != 0 || setupErr != nil)
	}
	return code
}

// missingBinaries names what cluster.sh needs and cannot find.
func missingBinaries() []string {
	var missing []string
	for _, b := range []string{"redis-server", "redis-cli", "nats-server", "bash", "go"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + b); err2 != nil {
				missing = append(missing, b)
			}
		}
	}
	if _, err := os.Stat(pgBin() + "/initdb"); err != nil {
		missing = append(missing, "PostgreSQL server binaries ("+pgBin()+"/initdb)")
	}
	return missing
}

// pgBin is where PostgreSQL's server binaries are (PG_BIN, else version 15's
// Debian path, else the newest installed).
func pgBin() string {
	if v := os.Getenv("PG_BIN"); v != "" {
		return v
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(dirs) == 0 {
		return "/usr/lib/postgresql/15/bin"
	}
	return dirs[len(dirs)-1]
}

// lockPath is the machine-wide lock of the suite; it holds the data directory
// of the topology that is up.
const lockPath = "/tmp/marketdata-clustertest.lock"

// lockMachine takes the suite's lock (waiting for another run to end) and
// takes down a topology a killed run left behind.
func lockMachine() (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close() //nolint:errcheck // nothing was written; the Flock error is the one to report
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	b, _ := io.ReadAll(f)
	if old := strings.TrimSpace(string(b)); old != "" && strings.Contains(old, "marketdata-cluster-") {
		if _, err := os.Stat(old); err == nil {
			root, _ := filepath.Abs("../..")
			cmd := exec.Command("bash", filepath.Join(root, "deploy/local/cluster.sh"), "down", "--purge")
			cmd.Env = append(os.Environ(), "CLUSTER_DIR="+old, "PG_BIN="+pgBin())
			out, err := cmd.CombinedOutput()
			fmt.Fprintf(os.Stderr, "cluster suite: took down the topology a previous run left in %s: %s %v\n", old, strings.TrimSpace(string(out)), err)
		}
	}
	return f, nil
}

// record writes the data directory of the topology that is up into the lock
// file ("" once it is down).
func record(lock *os.File, dir string) {
	err := lock.Truncate(0)
	if err == nil {
		_, err = lock.WriteAt([]byte(dir), 0)
	}
	if err != nil {
		// Only a later run reads the record, to take down what a crashed run left:
		// this run goes on, and says why a later one may find a topology in the way.
		fmt.Fprintf(os.Stderr, "cluster suite: record %q in %s: %v\n", dir, lockPath, err)
	}
}

func setUp(lock *os.File) (*suite, error) {
	started := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "marketdata-cluster-")
	if err != nil {
		return nil, err
	}
	record(lock, dir)
	s := &suite{root: root, dir: dir, script: filepath.Join(root, "deploy/local/cluster.sh"), lock: lock}
	s.bin = filepath.Join(dir, "marketdata")
	s.race = &raceBuild{path: filepath.Join(dir, "marketdata-race"), done: make(chan struct{})}
	go func() {
		defer close(s.race.done)
		s.race.err = goBuild(root, s.race.path, "-race")
	}()
	built := make(chan error, 1)
	go func() { built <- goBuild(root, s.bin) }()

	if out, err := s.cluster(context.Background(), "up"); err != nil {
		// The build must end before the setup returns; its error, if any, is told too.
		return s, errors.Join(fmt.Errorf("cluster.sh up: %w\n%s", err, out), <-built)
	}
	topology := time.Since(started)
	if err := <-built; err != nil {
		return s, err
	}
	s.env = s.topologyEnv()
	if err := s.provision(); err != nil {
		return s, err
	}
	fmt.Printf("cluster suite: topology up in %s, processes ready and data loaded in %s\n",
		topology.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	return s, nil
}

// tearDown stops the processes and the topology. With keep (a failure),
// the data directory with every log stays for reading; its path is printed.
func (s *suite) tearDown(keep bool) {
	for _, c := range append(append([]*child{}, s.apis...), s.ingests...) {
		c.stop(10 * time.Second)
	}
	<-s.race.done
	args := []string{"down", "--purge"}
	if keep && os.Getenv("CI") != "true" {
		args = []string{"down"}
	}
	if out, err := s.cluster(context.Background(), args...); err != nil {
		fmt.Fprintf(os.Stderr, "cluster.sh down: %v\n%s", err, out)
		return // the next run takes it down
	}
	record(s.lock, "")
	if len(args) == 1 {
		fmt.Fprintf(os.Stderr, "cluster suite: logs and data kept in %s\n", s.dir)
	}
}

// cluster runs deploy/local/cluster.sh with the suite's data directory.
func (s *suite) cluster(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.script}, args...)...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+s.dir, "PG_BIN="+pgBin())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// restoreAtEnd runs cluster.sh args (a start-...) when the test ends, so that
// the next test finds the topology whole even when this one stopped halfway;
// a start of what runs already does nothing. A start that fails fails the test:
// the next tests would fail without saying why.
func (s *suite) restoreAtEnd(t *testing.T, args ...string) {
	t.Helper()
	t.Cleanup(func() {
		if out, err := s.cluster(context.Background(), args...); err != nil {
			t.Errorf("restore the topology: cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
}

// clusterT runs cluster.sh and fails the test when it fails.
func (s *suite) clusterT(t *testing.T, args ...string) {
	t.Helper()
	started := time.Now()
	out, err := s.cluster(context.Background(), args...)
	if err != nil {
		t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("cluster.sh %s (%s): %s", strings.Join(args, " "), time.Since(started).Round(time.Millisecond), strings.TrimSpace(out))
}

func goBuild(root, out string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", out, "./cmd/marketdata")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

func (s *suite) topologyEnv() []string {
	var redis, nats []string
	for _, p := range redisPorts {
		redis = append(redis, fmt.Sprintf("127.0.0.1:%d", p))
	}
	for _, p := range natsPorts {
		nats = append(nats, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return []string{
		"MD_REDIS_URL=" + strings.Join(redis, ","),
		"MD_NATS_URL=" + strings.Join(nats, ","),
		"MD_DATABASE_URL=" + pgURL(pgPrimaryPort),
		"MD_DATABASE_READ_URL=" + pgURL(pgReplicaPort),
		"MD_STREAM_REPLICAS=3",
		"MD_CURSOR_SECRET=" + cursorSecret,
		"MD_KEY_PEPPER=" + keyPepper,
		"MD_DOCS_ORIGIN=http://127.0.0.1:1",
	}
}

func pgURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/marketdata?sslmode=disable", port)
}

// provision migrates, creates the suite's account and key, starts two
// ingest workers and three API nodes, and loads a synthetic world.
func (s *suite) provision() error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := s.command(ctx, "migrate"); err != nil {
		return err
	}
	// API nodes check the schema on the replica too: let it replay the migration.
	if err := replicaCaughtUp(ctx); err != nil {
		return err
	}
	account, secret, err := s.newKey(ctx, "clustertest", "markets:read,account:read")
	if err != nil {
		return err
	}
	s.account, s.secret = account, secret
	for i := range 2 {
		c, err := s.startIngest(ctx, fmt.Sprintf("ingest%d", i+1))
		if err != nil {
			return err
		}
		s.ingests = append(s.ingests, c)
	}
	for i := range 3 {
		// A window the load of the failover tests never fills; the limits
		// test starts nodes of its own with a small one.
		c, err := s.startAPI(ctx, fmt.Sprintf("api%d", i+1), []string{"MD_RATE_LIMIT=1000000"})
		if err != nil {
			return err
		}
		s.apis = append(s.apis, c)
	}
	if _, err := s.command(ctx, "feed", "--events", "120", "--rate", "40", "--duration", "3s", "--seed", "8"); err != nil {
		return err
	}
	return s.quiesce(ctx)
}

// newKey creates an account with access and a key; it returns the account
// id and the key's secret.
func (s *suite) newKey(ctx context.Context, name, scopes string) (string, string, error) {
	var acct struct {
		AccountID string `json:"account_id"`
	}
	if err := s.commandJSON(ctx, &acct, "account", "create", "--name", name); err != nil {
		return "", "", err
	}
	if _, err := s.command(ctx, "access", "grant", "--account", acct.AccountID, "--json"); err != nil {
		return "", "", err
	}
	var key struct {
		Secret string `json:"secret"`
	}
	if err := s.commandJSON(ctx, &key, "key", "create", "--account", acct.AccountID, "--scopes", scopes); err != nil {
		return "", "", err
	}
	if key.Secret == "" {
		return "", "", errors.New("key create --json printed no secret")
	}
	return acct.AccountID, key.Secret, nil
}
