//go:build tools

// Package main pins modules the packages under construction depend on, so that
// parallel work on them never has to edit go.mod. Removed once every module is imported.
package main

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/goccy/go-yaml"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/spf13/cobra"
	_ "github.com/vbauerster/mpb/v8"
	_ "go.mongodb.org/mongo-driver/v2/mongo"
	_ "golang.org/x/net/http2"
	_ "golang.org/x/term"
)
