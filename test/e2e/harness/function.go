package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Startup limits. They bound how long to wait for a function that never
// comes up; none of them is an assertion about speed.
const (
	startAttempts = 3                // a port taken between probe and bind gets another try
	startTimeout  = 30 * time.Second // per attempt, until the port accepts connections
	dialTimeout   = 500 * time.Millisecond
	pollInterval  = 20 * time.Millisecond
)

// Function is the function binary serving gRPC without TLS on a loopback
// port, as crossplane render's Development runtime expects.
type Function struct {
	// Address is host:port, for the annotation
	// render.crossplane.io/runtime-development-target.
	Address string

	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// StartFunction runs bin --insecure on a free 127.0.0.1 port and returns
// once the port accepts connections. The caller must Stop it.
func StartFunction(ctx context.Context, bin string) (*Function, error) {
	var errs []error
	for range startAttempts {
		f, err := startFunction(ctx, bin)
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func startFunction(ctx context.Context, bin string) (*Function, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	f := &Function{
		Address: addr,
		cmd:     exec.Command(bin, "--insecure", "--address="+addr),
		out:     &syncBuffer{},
		exited:  make(chan struct{}),
	}
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	dieWithParent(f.cmd)
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	go func() {
		f.err = f.cmd.Wait()
		close(f.exited)
	}()

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		select {
		case <-f.exited:
			return nil, fmt.Errorf("cannot start the function on %s: it exited (%w):\n%s", addr, f.err, f.out.String())
		case <-ctx.Done():
			_ = f.Stop()
			return nil, fmt.Errorf("cannot start the function on %s: %w", addr, ctx.Err())
		case <-deadline.C:
			_ = f.Stop()
			return nil, fmt.Errorf("cannot start the function: %s did not accept connections within %s:\n%s", addr, startTimeout, f.out.String())
		case <-time.After(pollInterval):
		}
		if c, err := net.DialTimeout("tcp", addr, dialTimeout); err == nil {
			_ = c.Close()
			return f, nil
		}
	}
}

// Stop kills the function by its PID and waits for it to exit. It is safe
// to call more than once, and after the function has exited on its own.
func (f *Function) Stop() error {
	select {
	case <-f.exited:
		return nil
	default:
	}
	if err := f.cmd.Process.Kill(); err != nil {
		// It may have exited between the check above and the kill.
		select {
		case <-f.exited:
			return nil
		default:
			return fmt.Errorf("cannot stop the function (pid %d): %w", f.cmd.Process.Pid, err)
		}
	}
	<-f.exited
	return nil
}

// PID returns the function's process id.
func (f *Function) PID() int { return f.cmd.Process.Pid }

// Log returns what the function wrote to stdout and stderr so far.
func (f *Function) Log() string { return f.out.String() }

// freePort returns a loopback port nothing listens on right now. Another
// process may take it before the function binds it; StartFunction retries.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("cannot find a free port: %v is not a TCP address", l.Addr())
	}
	return a.Port, nil
}

// syncBuffer is a bytes.Buffer safe for the process's writes and our reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
