package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks Linux to kill the function if this process dies
// without stopping it, for example when go test kills a test binary that
// ran past -timeout. Linux sends the signal when the thread that started
// the child exits; Go keeps its threads for the life of the process unless
// a goroutine locked to one exits, which this package never does.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
