//go:build unix

package fn

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the test process has used, user and system: on a
// shared machine it varies far less than a call's wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
