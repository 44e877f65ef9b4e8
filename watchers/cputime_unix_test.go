//go:build unix

package watchers_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, the garbage collector's
// included: on a machine shared with other work, a steadier measure of a
// benchmark's cost than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
