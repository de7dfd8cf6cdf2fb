//go:build !unix

package serve

import (
	"os"
	"syscall"
)

// sysProcAttr: without process groups, a replica stops when its standard
// input closes (racetest stopped or died), or is killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { p.Kill() }
func kill(p *os.Process)      { p.Kill() }
