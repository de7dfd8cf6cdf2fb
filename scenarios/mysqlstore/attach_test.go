package mysqlstore

import (
	"context"
	"strings"
	"testing"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
)

// A replica process attaches to the tables its parent prepared for the same
// run id: its attempts land in them, the parent counts them, the replica's
// Cleanup drops nothing and the parent's drops everything.
func TestAttachToParentsTables(t *testing.T) {
	p := serverParams(t)
	ctx := context.Background()
	for _, c := range []struct {
		scenario, variant string
		tables            int
	}{
		{scenarios.MemorySet, "", 1},
		{scenarios.UniqueInsert, VariantActivePerUser, 1},
		{scenarios.TTLLease, "", 2},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			p := p
			p.RunID, p.Variant = scenarios.NewRunID(), c.variant
			parent := build(t, c.scenario, p)
			if err := parent.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			defer parent.Cleanup(ctx)
			child := build(t, c.scenario, p)
			if err := child.Attach(ctx); err != nil {
				t.Fatalf("attach: %v", err)
			}
			if child.table != parent.table || child.grants != parent.grants {
				t.Errorf("child uses %q/%q, parent made %q/%q", child.table, child.grants, parent.table, parent.grants)
			}
			subj, err := parent.Reset(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			app, err := child.Open(ctx, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := app.Session(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			out := sess.Attempt(ctx, subj, &runner.Worker{ID: 0, Replica: 1})
			sess.Close()
			app.Close()
			if out.Class != runner.Executed {
				t.Fatalf("the child's attempt: %v, want executed", out)
			}
			if n, err := parent.Effects(ctx, subj); err != nil || n != 1 {
				t.Errorf("the parent counts %d effects (%v), want the child's 1", n, err)
			}
			if err := child.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runTables(t, p); len(got) != c.tables {
				t.Errorf("after the child's cleanup the run has tables %v, want the parent's %d still there", got, c.tables)
			}
			if err := parent.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runTables(t, p); len(got) != 0 {
				t.Errorf("after the parent's cleanup, tables %v are left", got)
			}
		})
	}
}

// A replica given a run id whose tables do not exist makes none: it fails,
// naming the table and the run id.
func TestAttachNeverCreates(t *testing.T) {
	p := serverParams(t)
	ctx := context.Background()
	child := build(t, scenarios.CheckThenWrite, p)
	defer child.st.Close()
	err := child.Attach(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), p.RunID) {
		t.Fatalf("attach to no tables: %v, want an error naming the run id", err)
	}
	if got := runTables(t, p); len(got) != 0 {
		t.Errorf("a failed attach left tables %v", got)
	}
	if _, err := child.Open(ctx, 0, 1); err == nil {
		t.Error("Open without Prepare or Attach succeeded")
	}
}
