//go:build unix && !linux

package testsupport

import "syscall"

// procAttr puts a process in its own group. Other Unix systems have no
// Pdeathsig: a process outlives a test binary that crashes, as a Redis
// started by a test elsewhere would.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
