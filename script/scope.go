package script

import (
	"text/template/parse"

	"github.com/racetest/racetest/runner"
)

// ScopedInvariants says which invariants read only the burst's own subject:
// those whose template names {{.Token}}. A fresh subject starts clean, so
// such an invariant judges every burst by the violations it adds; one that
// reads the whole table judges only the bursts before which it held
// (runner.InvariantScoper).
func (t *Target) ScopedInvariants() []bool {
	out := make([]bool, len(t.sc.Invariants))
	for i, inv := range t.sc.Invariants {
		out[i] = inv.usesToken()
	}
	return out
}

// usesToken reports whether some step of the script names {{.Token}}.
func (s *Script) usesToken() bool {
	for i := range s.Steps {
		for _, p := range s.Steps[i].parts {
			if p.tmpl != nil && p.tmpl.Tree != nil && namesToken(p.tmpl.Tree.Root) {
				return true
			}
		}
	}
	return false
}

// namesToken walks a template's parse tree for the field .Token.
func namesToken(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if namesToken(c) {
				return true
			}
		}
	case *parse.ActionNode:
		return namesToken(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if namesToken(c) {
				return true
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if namesToken(a) {
				return true
			}
		}
	case *parse.FieldNode:
		return len(n.Ident) > 0 && n.Ident[0] == "Token"
	case *parse.VariableNode:
		// $.Token: the data's Token from inside a with or a range.
		return len(n.Ident) > 1 && n.Ident[0] == "$" && n.Ident[1] == "Token"
	case *parse.ChainNode:
		return namesToken(n.Node) || len(n.Field) > 0 && n.Field[0] == "Token"
	case *parse.IfNode:
		return namesToken(n.Pipe) || namesToken(n.List) || namesToken(n.ElseList)
	case *parse.WithNode:
		return namesToken(n.Pipe) || namesToken(n.List) || namesToken(n.ElseList)
	case *parse.RangeNode:
		return namesToken(n.Pipe) || namesToken(n.List) || namesToken(n.ElseList)
	}
	return false
}

var _ runner.InvariantScoper = (*Target)(nil)
