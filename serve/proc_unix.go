//go:build unix && !linux

package serve

import (
	"os"
	"syscall"
)

// sysProcAttr puts each replica in its own process group, so a Ctrl-C at the
// terminal reaches only racetest, which stops the replicas in order. A
// replica also stops when its standard input closes (racetest died).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func terminate(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGTERM) }
func kill(p *os.Process)      { syscall.Kill(-p.Pid, syscall.SIGKILL) }
