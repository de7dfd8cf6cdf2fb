package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/racetest/racetest/scenarios"
)

// clusterDemoPlans builds the rows of 'demo --cluster': each clustered
// scenario's demo rows on each backend that implements it, where that
// backend's primary and replica are named (the connection flags, or the
// RACETEST_* variables scripts/cluster.sh prints) and answer. The rows it
// cannot run are named on stderr, each cluster with the command that
// starts it, and in the title; none at all is a setup error (exit 3).
func clusterDemoPlans(ctx context.Context, o *demoOptions) ([]plan, string, error) {
	var plans []plan
	var running, down []string
	checked := map[string]string{} // backend → why it cannot run ("" : it can)
	for _, spec := range o.Registry.Scenarios() {
		if spec.Topology == "" || len(spec.Demo) == 0 {
			continue
		}
		for _, name := range o.Registry.BackendsOf(spec.Name) {
			if o.backendSet && name != o.Backend {
				continue
			}
			b, _ := o.Registry.Backend(name)
			if b.ReadConn == nil {
				continue
			}
			why, seen := checked[name]
			if !seen {
				why = clusterDown(ctx, b, o.Shape.Conn)
				checked[name] = why
			}
			cluster := b.ReadConn.Cluster
			if why != "" {
				fmt.Fprintf(o.IO.ErrOut, "skipped %d rows of %s on %s: %s\n  start it: eval \"$(scripts/cluster.sh start %s)\"\n",
					len(spec.Demo), spec.Name, name, why, cluster)
				if !slices.Contains(down, cluster) {
					down = append(down, cluster)
				}
				continue
			}
			if !slices.Contains(running, cluster) {
				running = append(running, cluster)
			}
			if err := o.Shape.validate(o.Registry, name); err != nil {
				return nil, "", err
			}
			for _, dc := range spec.Demo {
				p, err := demoPlan(o, spec, dc, name)
				if err != nil {
					return nil, "", usageError(err)
				}
				plans = append(plans, p)
			}
		}
	}
	if len(plans) == 0 && len(down) == 0 {
		return nil, "", usageErrorf("backend %s has no clustered scenarios (%s): leave --backend out to run them all", o.Backend, clusteredOn(o.Registry))
	}
	if len(plans) == 0 {
		return nil, "", setupError(fmt.Errorf("demo --cluster: no cluster is running (see above); 'scripts/cluster.sh start %s' starts one and prints the variables to eval",
			strings.Join(down, "|")))
	}
	title := fmt.Sprintf("racetest demo --cluster — %d runs on %s, %d attempts released together, up to %d bursts each",
		len(plans), strings.Join(running, ", "), o.Shape.Attempts, o.Shape.Bursts)
	if len(down) > 0 {
		title += fmt.Sprintf(" (skipped, not running: %s)", strings.Join(down, ", "))
	}
	return plans, title, nil
}

// clusterDown says why backend b's clustered rows cannot run with the
// connections c: its replica or its primary not named (the shared server
// on the standard port is never taken for a cluster's primary), or
// nothing answering where they are; "" when both answer.
func clusterDown(ctx context.Context, b scenarios.Backend, c scenarios.Connections) string {
	read, primary := c.Get(b.ReadConn.Key), c.Get(b.Conn.Key)
	switch {
	case read == "":
		return fmt.Sprintf("no replica named (--%s or %s)", b.ReadConn.Flag, b.ReadConn.Env)
	case primary == "":
		return fmt.Sprintf("no primary named (--%s or %s; the standard local server is not the cluster's primary)", b.Conn.Flag, b.Conn.Env)
	}
	for _, conn := range []*scenarios.Connection{b.Conn, b.ReadConn} {
		if conn.Probe == nil {
			continue
		}
		if err := conn.Probe(ctx, c.Get(conn.Key)); err != nil {
			return "not running: " + err.Error()
		}
	}
	return ""
}

// clusteredOn says where the clustered scenarios run: "replica-read on
// mysql, postgres; failover-lock on redis".
func clusteredOn(reg *scenarios.Registry) string {
	var parts []string
	for _, spec := range reg.Scenarios() {
		if spec.Topology != "" {
			parts = append(parts, spec.Name+" on "+strings.Join(reg.BackendsOf(spec.Name), ", "))
		}
	}
	return strings.Join(parts, "; ")
}
