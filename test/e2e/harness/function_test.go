//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// fakeFunctionEnv makes this test binary act as the function binary that
// StartFunction runs: "serve" listens on --address until killed, "exit"
// fails at once.
const fakeFunctionEnv = "HARNESS_TEST_FAKE_FUNCTION"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeFunctionEnv) {
	case "serve":
		fakeFunction()
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot listen: no reason")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// fakeFunction listens where --address says and accepts connections until
// it is killed.
func fakeFunction() {
	var addr string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--address="); ok {
			addr = v
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(2)
		}
		_ = c.Close()
	}
}

func TestStartFunction(t *testing.T) {
	t.Setenv(fakeFunctionEnv, "serve")
	f, err := StartFunction(context.Background(), os.Args[0])
	if err != nil {
		t.Fatalf("StartFunction(...): %v", err)
	}
	pid := f.PID()
	// StartFunction returned, so the port accepts connections.
	c, err := net.Dial("tcp", f.Address)
	if err != nil {
		t.Errorf("cannot connect to the started function at %s: %v", f.Address, err)
	} else {
		_ = c.Close()
	}
	if err := f.Stop(); err != nil {
		t.Fatalf("Stop(): %v", err)
	}
	// Stop waited for the process, so its PID is gone.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Stop, signalling pid %d: got %v, want ESRCH", pid, err)
	}
	if err := f.Stop(); err != nil {
		t.Errorf("a second Stop(): %v", err)
	}
}

func TestStartFunctionThatExits(t *testing.T) {
	t.Setenv(fakeFunctionEnv, "exit")
	f, err := StartFunction(context.Background(), os.Args[0])
	if err == nil {
		_ = f.Stop()
		t.Fatal("StartFunction(a binary that exits): got no error")
	}
	for _, want := range []string{"it exited", "cannot listen: no reason"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartFunction(a binary that exits): error %q does not contain %q", err, want)
		}
	}
}
