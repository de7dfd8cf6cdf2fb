// Package privserver starts private database servers for tests that must
// hurt a server — kill it, pause it, restart it — without touching the
// machine's shared ones: a Redis, a MariaDB or a PostgreSQL of its own, on a
// free port, with its data, socket and log in a temporary directory.
//
// Each server runs in a process group of its own, so that a signal reaches
// every process of it (PostgreSQL forks one per connection), and dies with
// the test process (Pdeathsig) even when the test is killed. Close kills the
// group and removes the directory; Start registers Close with t.Cleanup, so
// it happens whether the test passes or fails.
//
// It is Linux-only (process groups, Pdeathsig and /proc).
package privserver
