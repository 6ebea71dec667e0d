package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/internal/backoff"
)

// pgNode is one PostgreSQL server of the failover pair, listening on a
// loopback port, run as the postgres user when this process is root.
type pgNode struct {
	name, bin, data, sock string
	port                  int
	cred                  *syscall.Credential
	cmd                   *exec.Cmd
	exited                chan struct{}
	log                   string
}

// pgPair is a primary and a synchronous streaming standby made with
// pg_basebackup.
type pgPair struct {
	dir              string
	primary, standby *pgNode
}

// pgCredential is the identity to run the server as: this process's own
// unless it is root, when it is the postgres user.
func pgCredential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

func pgBinDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_basebackup")
	if len(matches) == 0 {
		return "", fmt.Errorf("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *pgNode) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(n.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.cred}
	cmd.Dir = filepath.Dir(n.data)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// start starts the server with extra settings and waits until it accepts
// connections.
func (n *pgNode) start(ctx context.Context, settings ...string) error {
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", n.data, "-k", n.sock, "-p", strconv.Itoa(n.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=64MB",
		"-c", "fsync=on", "-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "hot_standby=on"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	n.cmd = exec.Command(filepath.Join(n.bin, "postgres"), args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(n.cmd, n.exited)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, n.url("postgres"))
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("%s exited during start-up:\n%s", n.name, tail(n.log))
		default:
		}
		if backoff.Sleep(ctx, 100*time.Millisecond) != nil {
			return fmt.Errorf("%s not ready: %v\n%s", n.name, err, tail(n.log))
		}
	}
}

func (n *pgNode) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.port, db)
}

// kill ends the server and its children with SIGKILL at once.
func (n *pgNode) kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// stop shuts the server down fast (SIGINT), killing it after 15 s.
func (n *pgNode) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	n.cmd = nil
}

// startPGPair initialises a primary with synchronous_standby_names =
// 'standby1' and synchronous_commit = syncCommit, copies it with
// pg_basebackup into a standby that streams from it as standby1, and
// waits until the primary reports the standby synchronous.
func startPGPair(ctx context.Context, syncCommit string) (*pgPair, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := pgCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tgrelay-pg-pair-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	p := &pgPair{dir: dir}
	mk := func(name string) (*pgNode, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		return &pgNode{name: name, bin: bin, data: filepath.Join(dir, name), sock: dir, port: port, cred: cred,
			log: filepath.Join(dir, name+".log")}, nil
	}
	if p.primary, err = mk("primary"); err != nil {
		return p, err
	}
	if p.standby, err = mk("standby"); err != nil {
		return p, err
	}
	pr, sb := p.primary, p.standby
	if err := pr.run(ctx, "initdb", "-D", pr.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return p, err
	}
	if err := pr.start(ctx, "synchronous_standby_names=standby1", "synchronous_commit="+syncCommit); err != nil {
		return p, err
	}
	if err := sb.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(pr.port), "-U", "postgres",
		"-D", sb.data, "-X", "stream", "-R", "--checkpoint=fast"); err != nil {
		return p, err
	}
	conninfo := fmt.Sprintf("primary_conninfo=host=127.0.0.1 port=%d user=postgres application_name=standby1", pr.port)
	if err := sb.start(ctx, conninfo); err != nil {
		return p, err
	}
	conn, err := pgx.Connect(ctx, pr.url("postgres"))
	if err != nil {
		return p, err
	}
	defer conn.Close(context.Background())
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var state string
		err := conn.QueryRow(wctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`).Scan(&state)
		if err == nil && state == "sync" {
			return p, nil
		}
		if backoff.Sleep(wctx, 100*time.Millisecond) != nil {
			return p, fmt.Errorf("standby never became synchronous (last: %q, %v)\n%s", state, err, tail(sb.log))
		}
	}
}

// promote promotes the standby and waits until it accepts writes.
func (p *pgPair) promote(ctx context.Context) error {
	sb := p.standby
	return sb.run(ctx, "pg_ctl", "promote", "-D", sb.data, "-w", "-t", "60")
}

// multiHostURL names both servers, for the one that accepts writes.
func (p *pgPair) multiHostURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		p.primary.port, p.standby.port, db)
}

func (p *pgPair) close() {
	if p.standby != nil {
		p.standby.stop()
	}
	if p.primary != nil {
		p.primary.stop()
	}
	os.RemoveAll(p.dir)
}
