package serve

import (
	"os"
	"syscall"
)

// sysProcAttr puts each replica in its own process group — a Ctrl-C at the
// terminal reaches only racetest, which stops the replicas in order — and
// has the kernel send it SIGTERM if racetest dies without stopping it.
// (Pdeathsig follows the thread that started the child; Go keeps its
// threads, and a replica also stops when its standard input closes.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

func terminate(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGTERM) }
func kill(p *os.Process)      { syscall.Kill(-p.Pid, syscall.SIGKILL) }
