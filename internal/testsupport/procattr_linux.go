package testsupport

import "syscall"

// procAttr puts a process in its own group, killed with the test binary.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
