package results

import (
	"fmt"
	"time"
)

// CPUTick is the unit the kernel counts a process's CPU time in
// (/proc/PID/stat's utime and stime, in USER_HZ = 100 a second): a CPU time
// read from two samples is off by up to a tick.
const CPUTick = 10 * time.Millisecond

// MinCPUTicks is how many ticks a CPU time must hold to be read to 10 %:
// one tick of error in ten.
const MinCPUTicks = 10

// CPUReadable reports whether a CPU time holds enough ticks to be read to
// 10 %. A figure made of fewer (a µs per delivery of one or two ticks,
// and any ratio of such figures) is noise and is shown as "–" with
// CPUTooFew's reason, not as a number.
func CPUReadable(cpu time.Duration) bool { return cpu >= MinCPUTicks*CPUTick }

// CPUTooFew says why the figure what, made of cpu, is not shown.
func CPUTooFew(what string, cpu time.Duration) string {
	return fmt.Sprintf("%s: – (%.0f CPU clock ticks of 10 ms, fewer than the %d that read it to 10 %%)",
		what, cpu.Seconds()/CPUTick.Seconds(), MinCPUTicks)
}
