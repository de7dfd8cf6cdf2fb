// Package pgstore is under construction: it will register its backend's
// scenarios. Until then it registers nothing.
package pgstore

import "github.com/racetest/racetest/scenarios"

// Register adds this backend and its scenarios to r.
func Register(r *scenarios.Registry) {}
