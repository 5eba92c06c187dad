package lbtest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/internal/testenv"
)

// composeFile is the part of docker-compose.yml this test reads (yaml.v3 resolves its anchors
// and merge keys).
type composeFile struct {
	Services map[string]struct {
		Environment map[string]string `yaml:"environment"`
		Networks    map[string]struct {
			IPv4 string `yaml:"ipv4_address"`
		} `yaml:"networks"`
	} `yaml:"services"`
}

// docker-compose.yml runs deploy/haproxy/haproxy.cfg as the loopback topology does: the
// balancer names the three API nodes at their MD_HTTP_ADDR port, checks /readyz on their
// MD_ADMIN_ADDR port, and is the one address the nodes trust for X-Forwarded-For. HAProxy
// accepts the file with compose's environment. (Docker is not on this machine: the balancer
// suite runs the same file on loopback.)
func TestComposeRunsTheBalancerConfig(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	lb, ok := c.Services["haproxy"]
	if !ok {
		t.Fatal("docker-compose.yml has no haproxy service")
	}
	lbIP := lb.Networks["default"].IPv4
	if net.ParseIP(lbIP) == nil {
		t.Fatalf("haproxy has no fixed address on the default network (%q): the nodes could not trust it alone", lbIP)
	}
	for i, name := range []string{"api1", "api2", "api3"} {
		node, ok := c.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no %s service", name)
		}
		env := node.Environment
		_, httpPort, _ := net.SplitHostPort(env["MD_HTTP_ADDR"])
		_, adminPort, _ := net.SplitHostPort(env["MD_ADMIN_ADDR"])
		n := string(rune('1' + i))
		if want := name + ":" + httpPort; httpPort == "" || lb.Environment["LB_API"+n] != want {
			t.Errorf("haproxy's LB_API%s is %q; %s serves on MD_HTTP_ADDR %q, want %q", n, lb.Environment["LB_API"+n], name, env["MD_HTTP_ADDR"], want)
		}
		if adminPort == "" || lb.Environment["LB_API"+n+"_CHECK_PORT"] != adminPort {
			t.Errorf("haproxy checks %s's /readyz on port %q; its MD_ADMIN_ADDR is %q", name, lb.Environment["LB_API"+n+"_CHECK_PORT"], env["MD_ADMIN_ADDR"])
		}
		if got, want := env["MD_TRUSTED_PROXIES"], lbIP+"/32"; got != want {
			t.Errorf("%s trusts X-Forwarded-For from %q, want HAProxy's address alone, %q", name, got, want)
		}
	}

	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		testenv.Unavailable(t, "haproxy (`make haproxy` installs Debian's package)", err)
	}
	cmd := exec.Command(haproxy, "-c", "-f", "../../deploy/haproxy/haproxy.cfg")
	cmd.Env = os.Environ()
	for k, v := range lb.Environment { // a check binds nothing
		if k == "LB_ERRORS" { // compose mounts deploy/haproxy at /usr/local/etc/haproxy
			if !strings.HasPrefix(v, "/usr/local/etc/haproxy/") {
				t.Fatalf("LB_ERRORS is %q, outside the mounted deploy/haproxy", v)
			}
			v = "../../deploy/haproxy/" + strings.TrimPrefix(v, "/usr/local/etc/haproxy/")
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Configuration file is valid") {
		t.Fatalf("haproxy -c with compose's environment: %v\n%s", err, out)
	}
}
