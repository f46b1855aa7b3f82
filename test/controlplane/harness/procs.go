package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// A Proc is one process the test started, in a process group of its own.
type Proc struct {
	name string
	Cmd  *exec.Cmd     // the running command
	Log  string        // the file its output goes to
	done chan struct{} // closed when the process has exited
	Err  error         // why it exited; read after done is closed
	// killed says the test killed or stopped it (kill, stop: a restart
	// with other arguments), so its exit is no news for the log of a
	// failed run.
	killed bool
}

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL if it is still there
// after grace. Only this process's own group is signalled, by its id.
func (p *Proc) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	p.killed = true
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// A child of the leader that ignored SIGTERM and outlived it still
	// belongs to the group; make sure none is left.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Procs starts processes and stops all of them when the test ends, even
// when it fails, in the reverse order of their start.
type Procs struct {
	tb     testing.TB
	LogDir string // where the processes' logs go
	runID  string // in the environment of every process started, see survivors

	mu    sync.Mutex
	all   []*Proc
	ports []int // every loopback port handed out, checked after the stop
}

func newProcs(tb testing.TB, logDir string) *Procs {
	id := os.Getenv(RunIDEnv)
	if id == "" {
		id = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	ps := &Procs{tb: tb, LogDir: logDir, runID: id}
	tb.Cleanup(ps.stopAll)
	return ps
}

// Start runs bin with args and env (added to this process's environment)
// and returns at once. Output goes to a log file whose tail is printed if
// the test fails. The child runs in its own process group, so that stop
// can end it and anything it forked, and dies with this test process if
// the test binary itself is killed (a panic on -timeout skips Cleanup).
func (ps *Procs) Start(name string, env []string, bin string, args ...string) *Proc {
	ps.tb.Helper()
	return ps.startWith(name, env, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}, nil, bin, args...)
}

// startWith is start with the process attributes given (startIsolated
// adds new namespaces) and what to close once the process has exited,
// before its done channel closes: startIsolated's host-side listeners, so
// that a restart can listen on the same ports again.
func (ps *Procs) startWith(name string, env []string, attr *syscall.SysProcAttr, closers []io.Closer, bin string, args ...string) *Proc {
	ps.tb.Helper()
	logPath := filepath.Join(ps.LogDir, name+".log")
	// Appended to, not truncated: a process started again after it
	// crashed (the soak's reviveExited) must not wipe the crash's output,
	// and the leak checks read every instance's lines.
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		ps.tb.Fatalf("cannot create log file for %s: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), append(env, RunIDEnv+"="+ps.runID)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		ps.tb.Fatalf("cannot start %s: %v", name, err)
	}
	p := &Proc{name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		_ = f.Close()
		for _, c := range closers {
			_ = c.Close()
		}
		close(p.done)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	ps.tb.Logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return p
}

// run runs a short-lived command to completion and returns its output.
func (ps *Procs) run(ctx context.Context, env []string, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), append(env, RunIDEnv+"="+ps.runID)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// CommandContext kills only the leader; kill the whole group.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func (ps *Procs) stopAll() {
	ps.mu.Lock()
	all := append([]*Proc(nil), ps.all...)
	ports := append([]int(nil), ps.ports...)
	ps.mu.Unlock()
	failed := ps.tb.Failed()
	for _, p := range slices.Backward(all) {

		early := !p.Running() && !p.killed
		p.Stop(15 * time.Second)
		if failed || early {
			ps.tb.Logf("--- %s (exited early: %t, %v), last lines of %s:\n%s", p.name, early, p.Err, p.Log, Tail(p.Log, 40))
		}
	}
	if failed || os.Getenv(keepLogsEnv) != "" {
		ps.keepLogs()
	}
	// No process the test started, nor anything they forked, may be left:
	// each carries the run's id in its environment.
	if left := Survivors(ps.runID); len(left) > 0 {
		ps.tb.Errorf("processes this test started are still running after every process was stopped: %s", strings.Join(left, "; "))
	}
	// Nothing the test started may still listen on a port it handed out.
	for _, port := range ports {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			ps.tb.Errorf("port %d still accepts connections after every process was stopped", port)
		}
	}
}

// keepLogs copies the processes' logs (the API server's audit log among
// them) to bin/controlplane-logs/<test>-<time> at the repository root:
// the test's temporary directory, where they are written, is removed when
// it ends, and a failure is read from them afterwards.
func (ps *Procs) keepLogs() {
	root, err := toolchain.Root()
	if err != nil {
		ps.tb.Logf("cannot keep the logs: %v", err)
		return
	}
	dst := filepath.Join(root, "bin", "controlplane-logs", strings.ReplaceAll(ps.tb.Name(), "/", "_")+"-"+time.Now().Format("20060102T150405"))
	logs, _ := filepath.Glob(filepath.Join(ps.LogDir, "*.log"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		ps.tb.Logf("cannot keep the logs: %v", err)
		return
	}
	for _, l := range logs {
		if err := copyFile(l, filepath.Join(dst, filepath.Base(l))); err != nil {
			ps.tb.Logf("cannot keep %s: %v", l, err)
		}
	}
	ps.tb.Logf("the logs are kept in %s", dst)
}

// copyFile copies the file src to dst, streaming: the audit log of a long
// run is large.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// keepLogsEnv, when set, keeps the logs of a run that passed too
// (keepLogs), for a look at how it went.
const keepLogsEnv = "CONTROLPLANE_KEEP_LOGS"

// RunIDEnv names the environment variable that marks every process one
// run of the suite starts. A parent (TestBreaksAreCaught) sets it for its
// child, so that it can look for leftovers after the child has exited.
const RunIDEnv = "CONTROLPLANE_TEST_RUN"

// Survivors lists the processes, other than this one, whose environment
// carries the run id: processes a run started, or their children, that are
// still alive. A child inherits its parent's environment, so a process
// forked by one the test started is found too; a zombie has an empty
// environment and is not.
//
// A killed process can take a moment to go, so it looks again for up to
// five seconds before it answers.
func Survivors(runID string) []string {
	left := survivorsNow(runID)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = survivorsNow(runID) {
		time.Sleep(100 * time.Millisecond)
	}
	return left
}

func survivorsNow(runID string) []string {
	want := []byte(RunIDEnv + "=" + runID + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		out = append(out, fmt.Sprintf("pid %d: %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
	}
	return out
}

// FreePort returns a loopback port nothing listens on now. Another process
// could take it before ours does; the servers then fail to start, loudly.
func (ps *Procs) FreePort() int {
	ps.tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ps.tb.Fatalf("cannot find a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ps.mu.Lock()
	ps.ports = append(ps.ports, port)
	ps.mu.Unlock()
	return port
}

// WaitFor polls check every interval until it returns true, ctx ends, or
// the process p (if not nil) exits. It returns the last error check gave.
func WaitFor(ctx context.Context, p *Proc, interval time.Duration, what string, check func(context.Context) (bool, error)) error {
	var last error
	for {
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if p != nil && !p.Running() {
			return fmt.Errorf("cannot wait for %s: %s exited: %w", what, p.name, p.Err)
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("cannot wait for %s: %w", what, errors.Join(ctx.Err(), last))
		case <-time.After(interval):
		}
	}
}

// Listening reports whether something accepts TCP connections on port.
func Listening(port int) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 500*time.Millisecond)
		if err != nil {
			return false, err
		}
		_ = c.Close()
		return true, nil
	}
}

// Latest returns the process last started under name, or nil.
func (ps *Procs) Latest(name string) *Proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range slices.Backward(ps.all) {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Kill sends SIGKILL to the process's group and waits until it has
// exited: a crash, with no chance to clean up.
func (p *Proc) Kill() {
	if !p.Running() {
		return
	}
	p.killed = true
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to the process's whole group: SIGSTOP and SIGCONT hang
// and resume every process of it, as a node under memory pressure or a
// debugger would.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.Running() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, sig)
	}
}

// Respawn starts p's command again, with the same arguments, environment
// and process attributes, after p has exited (kill), as a restarted pod
// would be. Its output is appended to p's log, so that a reader of the
// log (the function's calls, readComposed) sees both lives. A process
// started with closers (startIsolated) has host-side listeners that
// closed with it, so it is started again by its own start function
// instead.
func (ps *Procs) Respawn(p *Proc) *Proc {
	ps.tb.Helper()
	<-p.done
	f, err := os.OpenFile(p.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		ps.tb.Fatalf("cannot open the log of %s again: %v", p.name, err)
	}
	cmd := exec.Command(p.Cmd.Path, p.Cmd.Args[1:]...)
	cmd.Env = p.Cmd.Env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = p.Cmd.SysProcAttr
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		ps.tb.Fatalf("cannot start %s again: %v", p.name, err)
	}
	np := &Proc{name: p.name, Cmd: cmd, Log: p.Log, done: make(chan struct{})}
	go func() {
		np.Err = cmd.Wait()
		_ = f.Close()
		close(np.done)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, np)
	ps.mu.Unlock()
	ps.tb.Logf("started %s again (pid %d)", p.name, cmd.Process.Pid)
	return np
}
