package runner

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults shared by the library and the command line, so they cannot drift.
const (
	DefaultAttempts = 16
	DefaultBursts   = 100
	DefaultReplicas = 1
	DefaultWaves    = 1
	DefaultAllowed  = 1
	DefaultRequired = 1
	DefaultTimeout  = 10 * time.Second
)

// Config is a run's shape. Build it with New and the options below.
type Config struct {
	Attempts int  // N: attempts per wave
	Bursts   int  // T: bursts, each with a fresh subject
	Replicas int  // R: application instances; worker i uses replica i mod R
	Waves    int  // waves of N attempts per burst, all at the same subject
	Deploy   bool // restart every replica between waves (their memory is wiped)
	Allowed  int  // the most effects per subject that are correct
	// Required is the fewest effects per subject that are correct: exactly
	// once has a floor, and a payment that never happened is a failure too.
	// It must not exceed Allowed; a burst whose own allowance (Allowancer)
	// is lower requires no more than it allows.
	Required int
	Timeout  time.Duration // per attempt; 0 means none
	// Accounting judges each burst by what its attempts reported: every
	// attempt that reported success (Executed) must have landed exactly
	// once, so a burst's allowance and floor are both its executed
	// attempts — fewer effects is LOST, more is RACE. It overrides
	// Allowed, Required and a target's Allowancer and Requirer.
	Accounting bool
	// Retries is how many times an attempt the store refused with a
	// conflict (a deadlock, a serialization failure) is tried again, as an
	// application that retries them does; 0 reports the conflict as is.
	Retries int
	// StopOnViolation ends the run at the first burst over the allowance.
	StopOnViolation bool
	// TopUp fires another burst for each one that did not put the guard to
	// the test (Burst.Tested), until Bursts of them did or 2×Bursts were
	// fired: a bound on the violation rate counts only the bursts that
	// tested the guard, and a busy machine can leave one burst's attempts
	// apart.
	TopUp bool
	// Progress, when set, is called after every burst, from the runner's
	// goroutine. It must be quick.
	Progress func(Progress)
	// Keep leaves what Prepare made in the store (Cleanup is not called).
	Keep bool
	// Release, when set, releases each wave at the wire instead of at the
	// gate (see WireRelease).
	Release WireRelease
	// Notes are added to the run's report, after the target's own.
	Notes []string
	// Scheduler, when set, decides when attempts cross their steps (see
	// Worker.Step).
	Scheduler Scheduler
	// SoloEvery, when above 0, judges the bursts by solo twins instead of
	// an effects count (--effects auto): before every SoloEvery-th burst
	// (and the first) the same attempts run one at a time on a fresh
	// subject of their own, and each burst's change of the store (the
	// Target must be a Snapshotter) is compared with the latest twin's.
	SoloEvery int
}

// Option sets one field of a Config.
type Option func(*Config)

// Attempts sets N, the attempts released together in each wave.
func Attempts(n int) Option { return func(c *Config) { c.Attempts = n } }

// Bursts sets T, the number of bursts.
func Bursts(n int) Option { return func(c *Config) { c.Bursts = n } }

// Replicas sets R, the number of application instances.
func Replicas(n int) Option { return func(c *Config) { c.Replicas = n } }

// Waves sets how many waves of attempts each burst fires at its subject.
func Waves(n int) Option { return func(c *Config) { c.Waves = n } }

// Deploy restarts every replica between waves, wiping its memory.
func Deploy(on bool) Option { return func(c *Config) { c.Deploy = on } }

// Allowed sets how many effects per subject are correct.
func Allowed(n int) Option { return func(c *Config) { c.Allowed = n } }

// Required sets the fewest effects per subject that are correct (0 where no
// effect at all is a correct outcome).
func Required(n int) Option { return func(c *Config) { c.Required = n } }

// Accounting requires each attempt that reported success to have landed
// exactly once (see Config.Accounting).
func Accounting(on bool) Option { return func(c *Config) { c.Accounting = on } }

// Allowance is what a run allows per burst, as --allowed writes it: N
// (exactly N effects), MIN-MAX, or "successes" (Accounting).
type Allowance struct {
	Min, Max  int
	Successes bool
}

// DefaultAllowance is exactly DefaultAllowed effects per burst.
var DefaultAllowance = Allowance{Min: DefaultRequired, Max: DefaultAllowed}

// SuccessesWord is the --allowed value that asks for accounting.
const SuccessesWord = "successes"

// ParseAllowance reads "N", "MIN-MAX" (0 <= MIN <= MAX) or "successes":
// the one reading of --allowed for every command and suite field.
func ParseAllowance(s string) (Allowance, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, SuccessesWord) {
		return Allowance{Successes: true}, nil
	}
	a, b, isRange := strings.Cut(t, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := lo, error(nil)
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return Allowance{}, fmt.Errorf("%q is not an allowance: write N (exactly N effects per burst, 0 included), MIN-MAX with 0 <= MIN <= MAX (0-1: at most once), or %s (each attempt that reported success must have landed exactly once)", s, SuccessesWord)
	}
	return Allowance{Min: lo, Max: hi}, nil
}

// Options are the run options the allowance stands for.
func (a Allowance) Options() []Option {
	if a.Successes {
		return []Option{Accounting(true)}
	}
	return []Option{Allowed(a.Max), Required(a.Min)}
}

// String writes the allowance as ParseAllowance reads it.
func (a Allowance) String() string {
	if a.Successes {
		return SuccessesWord
	}
	if a.Min == a.Max {
		return strconv.Itoa(a.Max)
	}
	return strconv.Itoa(a.Min) + "-" + strconv.Itoa(a.Max)
}

// Timeout bounds each attempt; an attempt past it counts as Unknown.
func Timeout(d time.Duration) Option { return func(c *Config) { c.Timeout = d } }

// Retries tries an attempt that ended in a conflict again, up to k times.
func Retries(k int) Option { return func(c *Config) { c.Retries = k } }

// StopOnViolation ends the run at the first burst over the allowance.
func StopOnViolation(on bool) Option { return func(c *Config) { c.StopOnViolation = on } }

// TopUp replaces the bursts that did not test the guard (see Config.TopUp).
func TopUp(on bool) Option { return func(c *Config) { c.TopUp = on } }

// OnProgress sets the progress callback.
func OnProgress(f func(Progress)) Option { return func(c *Config) { c.Progress = f } }

// Schedule lets s order the attempts' steps (see Scheduler).
func Schedule(s Scheduler) Option { return func(c *Config) { c.Scheduler = s } }

// Keep leaves the run's namespaced objects in the store.
func Keep(on bool) Option { return func(c *Config) { c.Keep = on } }

// SoloTwins judges the bursts against solo twins run before every k-th
// burst (see Config.SoloEvery); 0 counts effects as usual.
func SoloTwins(k int) Option { return func(c *Config) { c.SoloEvery = k } }

// Progress is what the runner reports after each burst.
type Progress struct {
	Done, Total int
	Violations  int
}
