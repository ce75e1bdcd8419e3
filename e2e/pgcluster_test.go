//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// pgCluster is a private PostgreSQL cluster made from this machine's
// binaries in a temporary directory, on a free loopback port, for tests
// that must stop or restart PostgreSQL: never the shared cluster, which
// every other test and engineer uses.
type pgCluster struct {
	t    *testing.T
	bin  string // directory of initdb, pg_ctl
	data string
	port int
	// as runs the binaries as postgres when the test runs as root
	// (initdb refuses root), like scripts/dev.sh does for .data/.
	as  []string
	log string
}

// pgBinDir finds the newest installed PostgreSQL's bin directory (as
// scripts/dev.sh does), or PG_BIN when set.
func pgBinDir() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range append(dirs, "/usr/local/pgsql/bin") {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no PostgreSQL binaries (initdb, pg_ctl) found; set PG_BIN")
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// newPGCluster initialises and starts a cluster; it is stopped and removed
// when the test ends.
func newPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "codelotse-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{t: t, bin: bin, data: filepath.Join(root, "data"), port: freePort(t), log: filepath.Join(root, "server.log")}
	t.Cleanup(func() { os.RemoveAll(root) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal("running as root, a private cluster needs the postgres user: ", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	c.run("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.pgctl("stop", "-m", "immediate") })
	return c
}

// URL is the administrative connection to the cluster's postgres database.
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// stop shuts the server down with mode (fast: end every session, as an
// operator's restart does).
func (c *pgCluster) stop(mode string) error { return c.pgctl("stop", "-m", mode) }

// start starts the server again with the options of its first start and
// returns once it accepts connections.
func (c *pgCluster) start() error { return c.pgctl("start") }

func (c *pgCluster) pgctl(args ...string) error {
	full := append([]string{"-D", c.data, "-l", c.log, "-w", "-t", "60"}, args...)
	if args[0] == "start" {
		// Loopback only, and the socket in the cluster's own directory so
		// that nothing touches the shared cluster's /var/run/postgresql.
		// pg_ctl start does not remember -o (restart would; stop and start
		// are separate here to hold the outage open for a moment).
		full = append(full, "-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s", c.port, filepath.Dir(c.data)))
	}
	_, err := c.exec("pg_ctl", full...)
	return err
}

func (c *pgCluster) run(name string, args ...string) {
	c.t.Helper()
	if out, err := c.exec(name, args...); err != nil {
		c.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func (c *pgCluster) exec(name string, args ...string) (string, error) {
	argv := append(append(append([]string{}, c.as...), filepath.Join(c.bin, name)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		log, _ := os.ReadFile(c.log)
		return out.String() + "\nserver log:\n" + string(log), fmt.Errorf("%s %v after %s: %w", name, args, time.Since(start).Round(time.Millisecond), err)
	}
	return out.String(), nil
}
