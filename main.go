// Command racetest fires simultaneous attempts at "do it once" patterns and
// counts, in the store itself, how many really ran.
package main

import (
	"os"

	"github.com/racetest/racetest/cmd"
)

func main() { os.Exit(cmd.Main()) }
