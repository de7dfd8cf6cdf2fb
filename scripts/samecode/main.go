// Command samecode exits 0 when two Go files hold the same code: the same
// tokens in the same order, their comments and layout aside. The mutation
// gate (scripts/mutation.sh) uses it so that a change to a file's comments
// alone does not undo the judgement of its code: gremlins mutates tokens,
// and a comment holds none.
//
//	go run ./scripts/samecode OLD.go NEW.go
//
// Exit 0: the same code; 1: different code; 2: a file could not be read
// or scanned.
package main

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: samecode OLD.go NEW.go")
		os.Exit(2)
	}
	a, err := tokens(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "samecode:", err)
		os.Exit(2)
	}
	b, err := tokens(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "samecode:", err)
		os.Exit(2)
	}
	if !bytes.Equal(a, b) {
		os.Exit(1)
	}
}

// tokens is a file's code as one string: each token and its literal, a
// line each, without comments. A newline that ends a statement is the
// semicolon the scanner inserts for it, so a statement split otherwise
// still reads the same only if its tokens are.
func tokens(path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	var errs scanner.ErrorList
	s.Init(f, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	var out bytes.Buffer
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			lit = ";"
		}
		fmt.Fprintf(&out, "%s %s\n", tok, lit)
	}
	if len(errs) > 0 {
		return nil, errs.Err()
	}
	return out.Bytes(), nil
}
