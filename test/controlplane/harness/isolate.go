package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Envoy Gateway and AI Gateway are made to run in a pod: both bind fixed
// ports on every interface, and the same ones (8080 and 18002), and Envoy
// Gateway reads its TLS files from a fixed /certs (gateway v1.8.3
// internal/infrastructure/kubernetes/proxy/resource_provider.go,
// XdsTLSCertFilepath; no flag). So each runs here in a network and mount
// namespace of its own, like a pod: only a loopback interface, and /certs
// bind-mounted from a folder of the test's. Nothing it binds is seen on the
// host. The test binary itself is the wrapper that sets the namespace up
// (IsolateEnv, in TestMain): it brings lo up, mounts, joins the loopbacks
// through unix sockets on the shared filesystem, and runs the controller as
// its child.
//
// A port is either outbound (the controller dials 127.0.0.1:P inside its
// namespace and reaches 127.0.0.1:P on the host: the API server, the
// extension server) or inbound (a host client dials 127.0.0.1:P and
// reaches the controller's 127.0.0.1:P: a webhook, the extension server).

// IsolateEnv carries the wrapper's spec, as JSON, to the re-executed test
// binary.
const IsolateEnv = "CONTROLPLANE_ISOLATE"

// isolation is what the wrapper sets up before it starts the controller.
type isolation struct {
	SockDir  string            // where the unix sockets live
	Outbound []int             // ports the controller dials
	Inbound  []int             // ports the controller serves
	Mounts   map[string]string // target inside the namespace -> source folder
	Argv     []string          // the controller and its arguments
}

func outboundSock(dir string, port int) string {
	return filepath.Join(dir, "out-"+strconv.Itoa(port))
}

func inboundSock(dir string, port int) string {
	return filepath.Join(dir, "in-"+strconv.Itoa(port))
}

// startIsolated starts bin in a network and mount namespace of its own
// (see isolation). The host side of every port is served by this test
// process until the test ends. Mount targets must exist on the host (an
// empty folder is enough): a mount namespace shares the host's tree.
func (ps *Procs) startIsolated(name string, env []string, iso isolation, bin string, args ...string) *Proc {
	ps.tb.Helper()
	// Unix socket paths are limited to 108 bytes; TempDir paths can be long.
	dir, err := os.MkdirTemp("", "cp-"+name+"-")
	if err != nil {
		ps.tb.Fatalf("cannot create the socket folder of %s: %v", name, err)
	}
	ps.tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	iso.SockDir = dir
	iso.Argv = append([]string{bin}, args...)
	var listeners []io.Closer
	for _, p := range iso.Outbound {
		// The controller's outbound connections arrive on a unix socket
		// and go on to the host's loopback.
		l, err := net.Listen("unix", outboundSock(dir, p))
		if err != nil {
			ps.tb.Fatalf("cannot listen for %s's connections to port %d: %v", name, p, err)
		}
		listeners = append(listeners, l)
		ps.tb.Cleanup(func() { _ = l.Close() })
		go forward(l, "tcp", "127.0.0.1:"+strconv.Itoa(p))
	}
	for _, p := range iso.Inbound {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			ps.tb.Fatalf("cannot listen on port %d for %s: %v", p, name, err)
		}
		listeners = append(listeners, l)
		ps.tb.Cleanup(func() { _ = l.Close() })
		go forward(l, "unix", inboundSock(dir, p))
	}
	spec, err := json.Marshal(iso)
	if err != nil {
		ps.tb.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		ps.tb.Fatal(err)
	}
	return ps.startWith(name, append(env, IsolateEnv+"="+string(spec)),
		&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS},
		listeners, self)
}

// forward accepts connections on l and pipes each to a new connection to
// network/addr, until l is closed.
func forward(l net.Listener, network, addr string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial(network, addr)
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = io.Copy(out, in); closeWrite(out) })
			_, _ = io.Copy(in, out)
			closeWrite(in)
			wg.Wait()
		}()
	}
}

// closeWrite half-closes c, so that the other side sees the end of what
// this side sends but can still answer.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// RunIsolated is the wrapper, already inside its new namespaces. It
// returns the controller's exit code.
func RunIsolated(spec string) int {
	var iso isolation
	if err := json.Unmarshal([]byte(spec), &iso); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: cannot read the spec: %v\n", err)
		return 2
	}
	if err := isolate(&iso); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
		return 2
	}
	cmd := exec.Command(iso.Argv[0], iso.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The controller gets this process's environment but the spec.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, IsolateEnv+"=") })
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: cannot start %s: %v\n", iso.Argv[0], err)
		return 2
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode()
	}
	if err != nil {
		return 2
	}
	return 0
}

// isolate brings up lo, makes the mounts and starts the forwarders.
func isolate(iso *isolation) error {
	if err := loopbackUp(); err != nil {
		return err
	}
	// Mounts made here must not propagate to the host's tree.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("cannot make the mount tree private: %w", err)
	}
	for target, source := range iso.Mounts {
		if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("cannot bind-mount %s on %s: %w", source, target, err)
		}
	}
	for _, p := range iso.Outbound {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return fmt.Errorf("cannot listen on port %d for the controller's connections: %w", p, err)
		}
		go forward(l, "unix", outboundSock(iso.SockDir, p))
	}
	for _, p := range iso.Inbound {
		l, err := net.Listen("unix", inboundSock(iso.SockDir, p))
		if err != nil {
			return fmt.Errorf("cannot listen for connections to the controller's port %d: %w", p, err)
		}
		go forward(l, "tcp", "127.0.0.1:"+strconv.Itoa(p))
	}
	return nil
}

// loopbackUp sets the new network namespace's lo interface up: a new
// namespace starts with lo down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot open a socket to configure lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot read lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot set lo up: %w", err)
	}
	return nil
}
