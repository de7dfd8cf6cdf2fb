package incidents

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/racetest/racetest/runner"
	"github.com/racetest/racetest/scenarios"
	"github.com/racetest/racetest/scenarios/redisstore"
)

// FailoverLock is a lease acknowledged by a primary that dies before
// replicating it; the promoted replica grants it again.
const FailoverLock = "failover-lock"

// Variants of failover-lock.
const (
	WaitReplica = "wait"   // WAIT 1 before trusting the grant
	FencedWrite = "fenced" // a token the protected resource checks
	// AlertClaim guards alert-dedupe's fix instead of a lease: the claim
	// SET alert:<key> 1 NX PX 86400000, trusted as soon as the primary
	// acknowledged it.
	AlertClaim = "alert-claim"
	// AlertClaimWait is the alert claim trusted only once a replica
	// acknowledged it (WAIT 1).
	AlertClaimWait = "alert-claim-wait"
)

var failoverVariants = variants{Naive, WaitReplica, FencedWrite, AlertClaim, AlertClaimWait}

// racesUnderFailover are the variants that trust a grant only the primary
// acknowledged: a failover after it grants the subject again.
var racesUnderFailover = []string{Naive, AlertClaim}

// guardsAlert reports whether variant guards the seeds' alert claim (the
// effect is an alert sent) rather than a lease (a write to a resource).
func guardsAlert(variant string) bool { return variant == AlertClaim || variant == AlertClaimWait }

// waitsForReplica reports whether variant trusts a grant only once a
// replica acknowledged it.
func waitsForReplica(variant string) bool { return variant == WaitReplica || variant == AlertClaimWait }

// Faults racetest can inject into a cluster that scripts/cluster.sh started.
const (
	FaultNone             = "none"
	FaultFailoverAfterAct = "failover-after-act"
)

// clusterMarker is the file scripts/cluster.sh leaves in a cluster's
// directory; racetest kills or promotes only nodes listed in one.
const clusterMarker = "racetest-cluster"

const (
	failoverLeaseTTL = 5 * time.Second         // longer than any burst: only a failover frees it
	failoverPatience = 1500 * time.Millisecond // how long a worker tries for the lease
	failoverPoll     = 5 * time.Millisecond
	failoverReady    = 10 * time.Second // for the demoted node to catch up
)

func failoverSpec() scenarios.Spec {
	return scenarios.Spec{
		Name:   FailoverLock,
		Lesson: "a lock (or an alert claim) acknowledged by a primary that dies before replicating it is granted again by the promoted replica",
		Story: scenarios.Story{
			Naive: `if redis.SET("lease:"+job, me, NX, PX 5000) != OK { return }   // acknowledged by the primary
write(job)                                                       // the protected resource

// alert-claim: alert-dedupe's fix, the same SET NX PX
if redis.SET("alert:"+key, 1, NX, PX 86400000) != OK { return }  // another replica sent it
notify("credits low for app X")`,
			Breaks: `Redis replicates asynchronously: the primary answers OK, then sends the write to its
replica. When the primary dies in between — here racetest cuts the replication link, lets
the first holder's SET NX be acknowledged, kills the primary with SIGKILL and promotes the
replica (REPLICAOF NO ONE) — the new primary has never heard of the lease. The next worker
asks it, is granted the same lease, and writes too: two holders, two effects. The seeds'
alert claim (alert-dedupe's fix: SET alert:<key> 1 NX PX 86400000, then send) is lost the
same way: the next replica that sees the alert claims it on the new primary, and the alert
goes out twice (alert-claim).`,
			Fix: `wait: WAIT 1 <ms> after the grant, and trust it only if a replica acknowledged it (the
holder whose WAIT fails or answers 0 lets go and tries again; Redis docs: WAIT makes loss
less likely, not impossible — a replica that acknowledged and is then not the one promoted
still loses it). fenced: the lease carries a token from a counter on the same store, and
the protected resource refuses a token not higher than the last it accepted; after the
failover the counter has lost the first grant too, so the second holder's token is no
higher, and one of the two writes is refused (Kleppmann's fencing token). alert-claim-wait:
WAIT 1 after the alert claim; a claim no replica acknowledged is claimed again on the new
primary. Its residual risk is wait's, plus the seeds' fail-open policy: a claim not
confirmed within the 1.5 s deadline would be sent anyway (a duplicate allowed by policy),
so a replica that stays down makes every alert wait that long, then send.`,
			Numbers: `naive: 2 effects in nearly every burst with --fault failover-after-act (the default);
--fault none measures the same code without a failover (on one machine the replica is
current within a round trip, so expect 1). wait and fenced: exactly 1. Each burst injects a
real failover (a kill, a promotion, and the killed node restarted as the new replica),
so bursts take about a second; the report names the topology and the fault.
alert-claim: 2 alerts in every burst, counted by the simulated alert sink in racetest's
process, outside the failing store; alert-claim-wait: exactly 1 (the restarted node
acknowledges well within the deadline).`,
		},
		Expect: func(p scenarios.Params) scenarios.Expectation {
			v := cmp.Or(p.Variant, Naive)
			if p.Fault == FaultNone || !slices.Contains(racesUnderFailover, v) {
				return scenarios.ExpectSafe
			}
			return scenarios.ExpectRace
		},
		Topology: scenarios.TopologyReplica,
		Demo: []scenarios.DemoCase{
			// Each burst is a real failover (about a second): a few
			// bursts show it, as the tests do.
			{Label: "lease", Variant: Naive, Bursts: failoverDemoBursts},
			{Label: "lease, WAIT 1", Variant: WaitReplica, Bursts: failoverDemoBursts},
			{Label: "lease, fenced", Variant: FencedWrite, Bursts: failoverDemoBursts},
			{Label: "alert claim", Variant: AlertClaim, Bursts: failoverDemoBursts},
			{Label: "alert claim, WAIT 1", Variant: AlertClaimWait, Bursts: failoverDemoBursts},
		},
	}
}

// failoverDemoBursts caps a failover-lock row of 'demo --cluster': each
// burst kills, promotes and restarts a node.
const failoverDemoBursts = 5

// failoverFactory builds failover-lock on a Redis primary and its replica.
func failoverFactory(ctx context.Context, p scenarios.Params) (runner.Target, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v, err := failoverVariants.pick(FailoverLock, p.Variant)
	if err != nil {
		return nil, err
	}
	fault := p.Fault
	switch fault {
	case "":
		fault = FaultFailoverAfterAct
	case FaultNone, FaultFailoverAfterAct:
	default:
		return nil, scenarios.BadParam(fmt.Errorf("failover-lock has no fault %q; use --fault %s or %s", fault, FaultFailoverAfterAct, FaultNone))
	}
	if p.Conn.Get(redisstore.ReadKey) == "" {
		return nil, scenarios.BadParam(errors.New("failover-lock promotes a replica: set --redis-read-url (or RACETEST_REDIS_READ_URL) to the replica of --redis-url; 'scripts/cluster.sh start redis-replica' starts both and prints their URLs"))
	}
	srv, err := parseRedis(p)
	if err != nil {
		return nil, err
	}
	ropt, err := redis.ParseURL(p.Conn.Get(redisstore.ReadKey))
	if err != nil {
		return nil, scenarios.BadParam(fmt.Errorf("redis: cannot use the read URL %s", p.Conn.Get(redisstore.ReadKey)))
	}
	t := &failoverTarget{p: p, srv: srv, variant: v, fault: fault, resource: map[string]int64{}, accepted: map[string]int{}}
	t.nodes[0] = &redisNode{addr: srv.opt.Addr}
	t.nodes[1] = &redisNode{addr: ropt.Addr}
	for _, n := range t.nodes {
		n.cl = srv.client(n.addr, 2)
	}
	if err := t.checkCluster(ctx); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// redisNode is one server of the pair: where it listens, how racetest
// reaches it, and what it needs to start it again.
type redisNode struct {
	addr string
	cl   *redis.Client
	pid  int
	args []string // redis-server's arguments, read from the running node
}

// failoverTarget is failover-lock on one primary–replica pair.
type failoverTarget struct {
	p       scenarios.Params
	srv     *redisServer
	variant string
	fault   string
	reg     redisRegistration
	nodes   [2]*redisNode
	notes   []string

	mu        sync.Mutex
	primary   int // index in nodes
	faulted   chan struct{}
	fired     bool
	failovers int
	bursts    int              // bursts counted
	resource  map[string]int64 // the protected resource: the highest token it accepted per job
	accepted  map[string]int   // writes the resource accepted per job
	refused   int
}

func (t *failoverTarget) Server() string { return describeRedis(context.Background(), t.nodes[0].cl) }

func (t *failoverTarget) Close() error {
	t.reg.close()
	t.resumeReplica()
	var errs []error
	for _, n := range t.nodes {
		if n != nil && n.cl != nil {
			errs = append(errs, n.cl.Close())
		}
	}
	return errors.Join(errs...)
}

func (t *failoverTarget) current() *redisNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes[t.primary]
}

// checkCluster proves that both nodes belong to a cluster scripts/cluster.sh
// started (its marker lists them, with the process ids they report), and
// that the second replicates the first. racetest kills nothing else.
func (t *failoverTarget) checkCluster(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, redisConnectTimeout*2)
	defer cancel()
	for i, n := range t.nodes {
		if err := n.cl.Ping(cctx).Err(); err != nil {
			return fmt.Errorf("redis: cannot reach %s: %w — is the cluster running? scripts/cluster.sh status redis-replica", n.addr, err)
		}
		// A Redis Cluster's nodes are primaries and replicas too, and its
		// directories carry cluster.sh's marker: failing one over is not
		// this scenario's fault.
		if err := redisstore.RefuseCluster(cctx, "", n.cl, incidentsOnRedis); err != nil {
			return err
		}
		info, err := n.cl.Info(cctx, "server", "replication").Result()
		if err != nil {
			return err
		}
		fields := infoFields(info)
		n.pid, _ = strconv.Atoi(fields["process_id"])
		if i == 1 && (fields["role"] != "slave" || fields["master_port"] != portOf(t.nodes[0].addr)) {
			return scenarios.BadParam(fmt.Errorf("failover-lock: %s is not a replica of %s (role %s, primary port %s)", n.addr, t.nodes[0].addr, fields["role"], fields["master_port"]))
		}
		cfg, err := n.cl.ConfigGet(cctx, "*").Result()
		if err != nil {
			return err
		}
		if err := t.checkMarker(n, cfg["dir"]); err != nil {
			return err
		}
		n.args = []string{"--port", cfg["port"], "--bind", "127.0.0.1", "--daemonize", "yes", "--save", "", "--appendonly", "no",
			"--dir", cfg["dir"], "--logfile", cfg["logfile"], "--pidfile", cfg["pidfile"],
			"--repl-diskless-sync-delay", cfg["repl-diskless-sync-delay"]}
	}
	t.notes = append(t.notes, fmt.Sprintf("topology: primary %s, replica %s (scripts/cluster.sh); fault: %s", t.nodes[0].addr, t.nodes[1].addr, t.fault))
	return nil
}

// checkMarker finds n's directory listed in the marker of a cluster that
// scripts/cluster.sh started, with the pid n reports.
func (t *failoverTarget) checkMarker(n *redisNode, dir string) error {
	refuse := func(why string) error {
		return scenarios.BadParam(fmt.Errorf("failover-lock kills and promotes servers, so it runs only on a cluster that scripts/cluster.sh started: %s %s", n.addr, why))
	}
	if dir == "" {
		return refuse("does not say its directory")
	}
	f, err := os.Open(filepath.Join(filepath.Dir(dir), clusterMarker))
	if err != nil {
		return refuse("has no " + clusterMarker + " marker beside its directory " + dir)
	}
	defer f.Close()
	creator, listed := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "creator=racetest scripts/cluster.sh" {
			creator = true
		}
		if strings.HasPrefix(line, "node=") && strings.Contains(line, " 127.0.0.1:"+portOf(n.addr)+" ") && strings.HasSuffix(line, "datadir="+dir) {
			listed = true
			pidfile := strings.Fields(strings.SplitN(line, "pidfile=", 2)[1])[0]
			if b, err := os.ReadFile(pidfile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(n.pid) {
				return refuse(fmt.Sprintf("reports pid %d, which its pid file %s does not hold", n.pid, pidfile))
			}
		}
	}
	if !creator || !listed {
		return refuse("is not listed in the marker " + f.Name())
	}
	return nil
}

func infoFields(info string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

func (t *failoverTarget) Prepare(ctx context.Context) error {
	return t.reg.register(ctx, t.current().cl, t.p.RunID, t.current().addr)
}

// Cleanup deletes the run's keys, and hands the primary role back to the
// node that had it, so that the cluster's URLs stay true.
func (t *failoverTarget) Cleanup(ctx context.Context) error {
	t.resumeReplica()
	var errs []error
	if t.current() != t.nodes[0] {
		errs = append(errs, t.switchBack(ctx))
	}
	errs = append(errs, t.reg.drop(ctx, t.current().cl, t.p.RunID, t.current().addr))
	return errors.Join(errs...)
}

// switchBack promotes the original primary again once it has caught up:
// with nothing writing, no acknowledged write is lost.
func (t *failoverTarget) switchBack(ctx context.Context) error {
	cctx, cancel := scenarios.CleanupContext(ctx)
	defer cancel()
	orig, now := t.nodes[0], t.current()
	if err := t.waitInSync(cctx, now, orig); err != nil {
		return err
	}
	if err := orig.cl.ReplicaOf(cctx, "NO", "ONE").Err(); err != nil {
		return err
	}
	if err := now.cl.ReplicaOf(cctx, "127.0.0.1", portOf(orig.addr)).Err(); err != nil {
		return err
	}
	t.mu.Lock()
	t.primary = 0
	t.mu.Unlock()
	return t.waitInSync(cctx, orig, now)
}

// waitInSync waits until replica's link to primary is up and it has
// everything primary has sent.
func (t *failoverTarget) waitInSync(ctx context.Context, primary, replica *redisNode) error {
	deadline := time.Now().Add(failoverReady)
	for {
		pi, perr := primary.cl.Info(ctx, "replication").Result()
		ri, rerr := replica.cl.Info(ctx, "replication").Result()
		if perr == nil && rerr == nil {
			p, r := infoFields(pi), infoFields(ri)
			if r["master_link_status"] == "up" && r["master_port"] == portOf(primary.addr) && r["slave_repl_offset"] == p["master_repl_offset"] {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis: %s did not catch up with %s within %s: %v %v", replica.addr, primary.addr, failoverReady, perr, rerr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Reset starts a burst with the replica in sync, and, for the fault, the
// replication link cut: the next acknowledged write stays on the primary.
func (t *failoverTarget) Reset(ctx context.Context, burst int) (runner.Subject, error) {
	t.mu.Lock()
	primary, replica := t.nodes[t.primary], t.nodes[1-t.primary]
	t.faulted, t.fired = make(chan struct{}), false
	t.mu.Unlock()
	if err := t.waitInSync(ctx, primary, replica); err != nil {
		return runner.Subject{}, err
	}
	if t.fault == FaultFailoverAfterAct {
		// Freeze the replica, then close its link: it cannot reconnect
		// until racetest resumes it, after the primary is gone.
		if err := syscall.Kill(replica.pid, syscall.SIGSTOP); err != nil {
			return runner.Subject{}, fmt.Errorf("redis: could not pause the replica (pid %d): %w", replica.pid, err)
		}
		if err := primary.cl.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
			syscall.Kill(replica.pid, syscall.SIGCONT)
			return runner.Subject{}, err
		}
	}
	key := t.p.Prefix() + "lease" + strconv.Itoa(burst)
	if guardsAlert(t.variant) {
		key = t.p.Prefix() + "alert:credits-low:app" + strconv.Itoa(burst) // as alert-dedupe names it
	}
	return runner.Subject{Burst: burst, Key: key}, nil
}

// resumeReplica resumes the replica Reset paused: a run interrupted
// between Reset and the failover (Ctrl-C, or attempts that all failed)
// would leave it stopped for good, and the cluster broken for every later
// run. SIGCONT to a node that runs changes nothing.
func (t *failoverTarget) resumeReplica() {
	if t.fault != FaultFailoverAfterAct {
		return
	}
	t.mu.Lock()
	replica := t.nodes[1-t.primary]
	t.mu.Unlock()
	if replica != nil && replica.pid > 0 {
		_ = syscall.Kill(replica.pid, syscall.SIGCONT)
	}
}

// failover kills the primary, promotes the replica, and restarts the
// killed node as its replica. It runs once per burst, right after the
// first grant was acknowledged.
func (t *failoverTarget) failover(ctx context.Context) {
	t.mu.Lock()
	if t.fired || t.fault != FaultFailoverAfterAct {
		t.mu.Unlock()
		return
	}
	t.fired = true
	old, next := t.nodes[t.primary], t.nodes[1-t.primary]
	t.mu.Unlock()
	defer close(t.faulted)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failoverReady)
	defer cancel()
	_ = syscall.Kill(old.pid, syscall.SIGKILL)
	_ = syscall.Kill(next.pid, syscall.SIGCONT)
	if err := next.cl.ReplicaOf(fctx, "NO", "ONE").Err(); err != nil {
		t.note("promoting " + next.addr + " failed: " + err.Error())
		return
	}
	t.mu.Lock()
	t.primary = 1 - t.primary
	t.failovers++
	t.mu.Unlock()
	// SIGKILL is not instant: start the node again once its port is free
	// (a zombie the container never reaps still answers to kill -0).
	for fctx.Err() == nil {
		c, err := net.DialTimeout("tcp", old.addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	args := append(append([]string(nil), old.args...), "--replicaof", "127.0.0.1", portOf(next.addr))
	if out, err := exec.CommandContext(fctx, "redis-server", args...).CombinedOutput(); err != nil {
		t.note(fmt.Sprintf("restarting %s as a replica failed: %v %s", old.addr, err, out))
		return
	}
	for fctx.Err() == nil {
		if info, err := old.cl.Info(fctx, "server").Result(); err == nil {
			old.pid, _ = strconv.Atoi(infoFields(info)["process_id"])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (t *failoverTarget) note(s string) {
	t.mu.Lock()
	t.notes = append(t.notes, s)
	t.mu.Unlock()
}

// Effects counts the writes the protected resource accepted: it lives in
// this process, outside the failing store, like a payment provider.
func (t *failoverTarget) Effects(ctx context.Context, s runner.Subject) (int, error) {
	t.mu.Lock()
	ch := t.faulted
	t.mu.Unlock()
	if t.fault == FaultFailoverAfterAct {
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(failoverReady):
			// No grant at all this burst: resume the replica.
			t.mu.Lock()
			fired := t.fired
			t.mu.Unlock()
			if !fired {
				syscall.Kill(t.nodes[1-t.primary].pid, syscall.SIGCONT)
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bursts++
	return t.accepted[s.Key], nil
}

// Checks says whether the fault the run promised was injected in every
// burst: a SAFE over bursts without a failover would claim a fix held
// against a fault it never met.
func (t *failoverTarget) Checks(context.Context) []runner.Check {
	if t.fault != FaultFailoverAfterAct {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := runner.Check{Name: "failover injected", OK: t.failovers == t.bursts,
		Detail: fmt.Sprintf("%d failovers in %d bursts", t.failovers, t.bursts)}
	if !c.OK {
		c.Inconclusive = true
		c.Detail += ": the bursts without one did not test the fix against a failover"
	}
	return []runner.Check{c}
}

func (t *failoverTarget) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	notes := append([]string(nil), t.notes...)
	if t.fault == FaultFailoverAfterAct {
		notes = append(notes, fmt.Sprintf("%d failovers injected (kill, promote, restart as replica)", t.failovers))
	}
	if t.variant == FencedWrite {
		notes = append(notes, fmt.Sprintf("the resource refused %d writes whose token was not higher than the last it accepted", t.refused))
	}
	if guardsAlert(t.variant) {
		notes = append(notes, "alert-claim: the guarded action is alert-dedupe's claim (SET alert:<key> 1 NX PX 86400000); alerts sent are counted by the simulated alert sink in racetest's process, not by the failing store")
	}
	return notes
}

// write is the protected resource's door: fenced, it refuses a token not
// higher than the last it accepted.
func (t *failoverTarget) write(key string, token int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.variant == FencedWrite {
		if token <= t.resource[key] {
			t.refused++
			return false
		}
		t.resource[key] = token
	}
	t.accepted[key]++
	return true
}

func (t *failoverTarget) Open(context.Context, int, int) (runner.App, error) {
	return failoverApp{t}, nil
}

type failoverApp struct{ t *failoverTarget }

func (failoverApp) Close() error { return nil }

// Session: each worker's commands go to whichever node is primary now, as
// a client behind Sentinel or a DNS name would.
func (a failoverApp) Session(context.Context, int) (runner.Session, error) {
	return failoverSession(a), nil
}

type failoverSession struct{ t *failoverTarget }

func (failoverSession) Close() error { return nil }

func (s failoverSession) Attempt(ctx context.Context, sub runner.Subject, w *runner.Worker) runner.Outcome {
	t := s.t
	owner := "w" + strconv.Itoa(w.ID)
	ctx, cancel := context.WithTimeout(ctx, failoverPatience)
	defer cancel()
	w.Step(ctx, "check")
	for {
		n := t.current()
		token, granted, err := s.acquire(ctx, n, sub.Key, owner)
		if err == nil && granted {
			t.failover(ctx)
			if waitsForReplica(t.variant) && !s.replicated(ctx, n) {
				continue // the grant died with its primary: ask the new one
			}
			w.Step(ctx, "act")
			if !t.write(sub.Key, token) {
				return runner.Refused(fmt.Errorf("write refused: token %d is not higher than the last accepted", token))
			}
			return runner.Done()
		}
		select {
		case <-ctx.Done():
			if guardsAlert(t.variant) {
				return runner.Refused(errors.New("already sent: another replica holds the claim"))
			}
			return runner.Refused(errors.New("lease held by another"))
		case <-time.After(failoverPoll):
		}
	}
}

// replicated waits until a replica of n acknowledged the grant, for as long
// as n is still the primary; false when n is no longer.
func (s failoverSession) replicated(ctx context.Context, n *redisNode) bool {
	for ctx.Err() == nil && s.t.current() == n {
		acked, err := n.cl.Wait(ctx, 1, 100).Result()
		if err == nil && acked >= 1 {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// acquire asks node for the lease; fenced, the grant carries a token
// from a counter on the same store, raised only by a grant (in one script,
// as a lock service issues it).
func (s failoverSession) acquire(ctx context.Context, n *redisNode, key, owner string) (token int64, granted bool, err error) {
	switch {
	case guardsAlert(s.t.variant):
		// alert-dedupe's own claim, on the node that is primary now.
		ok, err := (&redisClaimConn{cmd: unclosable{n.cl}}).Claim(ctx, key, AlertWindow)
		return 0, ok, err
	case s.t.variant != FencedWrite:
		ok, err := n.cl.SetNX(ctx, key, owner, failoverLeaseTTL).Result()
		return 0, ok, err
	}
	token, err = grantFenced.Run(ctx, n.cl, []string{key, key + ":fence"}, owner, failoverLeaseTTL.Milliseconds(), keyTTL).Int64()
	return token, err == nil && token > 0, err
}

// grantFenced sets the lease if free and returns the next token, or 0.
var grantFenced = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return t
end
return 0`)
