//go:build !unix

package fn

import "time"

// cpuTime is not measured here: BenchmarkGRPC reports no CPU time.
func cpuTime() time.Duration { return 0 }
