// Command ferretdb runs an embedded FerretDB (MongoDB wire protocol over SQLite) for racetest's
// tests and CI, where no real MongoDB server can be installed.
//
// It lives in its own Go module so that FerretDB and its dependencies never enter the main
// module's dependency graph. scripts/ferretdb.sh builds it once per machine and caches the binary.
//
// FerretDB 1.x is NOT MongoDB: findAndModify and conditional updates are not atomic under
// concurrency, and partial/TTL indexes and transactions are refused. See shared/mongodb-in-ci.md.
// Clients can tell it apart: buildInfo reports a ferretdbVersion field.
//
// Usage:
//
//	ferretdb [-listen 127.0.0.1:27017] [-dir STATE_DIR] [-log-level warn]
//
// Without -dir a temporary directory is used and removed on exit.
// It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"

	"github.com/FerretDB/FerretDB/build/version"
	"github.com/FerretDB/FerretDB/ferretdb"
)

const ferretModule = "github.com/FerretDB/FerretDB"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	dir := flag.String("dir", "", "state directory for the SQLite files (default: a temporary directory removed on exit)")
	logLevel := flag.String("log-level", "warn", "log level: debug, info, warn or error")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	stateDir := *dir
	if stateDir == "" {
		tmp, err := os.MkdirTemp("", "racetest-ferretdb-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		stateDir = tmp
	} else if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}

	// Embedded FerretDB reports its version as "unknown" (the module zip carries no version.txt).
	// Report the module version this binary was really built with, so that clients which name the
	// server in their reports say which FerretDB they ran against.
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == ferretModule {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				version.Get().Version = dep.Version
			}
		}
	}

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + stateDir + "/",
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger.Info("ferretdb listening", "uri", f.MongoDBURI(), "dir", stateDir)
	if err := f.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
