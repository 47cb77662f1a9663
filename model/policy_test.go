package model

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Abbreviations for the decision table.
const (
	fire   = OutcomeFire
	spread = OutcomeSpread
	skip   = OutcomeSkip
	hold   = OutcomeHold
	drop   = OutcomeDrop
)

// catchups orders a row's columns.
var catchups = [4]CatchupPolicy{CatchupNone, CatchupLatest, CatchupFireImmediately, CatchupSpread}

// grid is one situation's outcomes: a row per overlap policy, a column per
// catch-up policy (none, latest, fire_immediately, spread).
type grid map[OverlapPolicy][4]Outcome

// same is a grid whose outcome depends on neither policy.
func same(o Outcome) grid {
	r := [4]Outcome{o, o, o, o}
	return grid{OverlapAllow: r, OverlapSkip: r, OverlapQueue: r}
}

// TestPolicyDecisions is the decision table of the overlap and catch-up
// policies: for each moment a run is judged (plan, launch, release) and
// each situation, what becomes of the run under every pair of policies.
// It does not depend on the default policies.
func TestPolicyDecisions(t *testing.T) {
	t.Parallel()
	atPlan := func(s PlanSituation) func(OverlapPolicy, CatchupPolicy) Outcome {
		return func(o OverlapPolicy, c CatchupPolicy) Outcome { return AtPlan(o, c, s) }
	}
	atLaunch := func(s LaunchSituation) func(OverlapPolicy, CatchupPolicy) Outcome {
		return func(o OverlapPolicy, c CatchupPolicy) Outcome { return AtLaunch(o, c, s) }
	}
	// At release, the held run is planned next: released if the run it
	// waited for ran, else as any run, here one found missed (the only
	// one, so the latest).
	atRelease := func(e EndedRun) func(OverlapPolicy, CatchupPolicy) Outcome {
		return func(o OverlapPolicy, c CatchupPolicy) Outcome {
			return AtPlan(o, c, PlanSituation{Released: AtRelease(e), Missed: true, Latest: true})
		}
	}
	for _, tc := range []struct {
		moment, situation string
		decide            func(OverlapPolicy, CatchupPolicy) Outcome
		want              grid
	}{
		{"plan", "on time", atPlan(PlanSituation{}), same(fire)},
		{"plan", "on time, another run in flight", atPlan(PlanSituation{InFlight: true}), grid{
			//              none  latest fire_imm spread
			OverlapAllow: {fire, fire, fire, fire},
			OverlapSkip:  {skip, skip, skip, skip},
			OverlapQueue: {hold, hold, hold, hold},
		}},
		{"plan", "missed, not the latest", atPlan(PlanSituation{Missed: true}), grid{
			OverlapAllow: {drop, drop, fire, spread},
			OverlapSkip:  {drop, drop, fire, spread},
			OverlapQueue: {drop, drop, fire, spread},
		}},
		{"plan", "missed, the latest", atPlan(PlanSituation{Missed: true, Latest: true}), grid{
			OverlapAllow: {drop, fire, fire, spread},
			OverlapSkip:  {drop, fire, fire, spread},
			OverlapQueue: {drop, fire, fire, spread},
		}},
		{"plan", "missed, the latest, another run in flight", atPlan(PlanSituation{Missed: true, Latest: true, InFlight: true}), grid{
			OverlapAllow: {drop, fire, fire, spread},
			OverlapSkip:  {drop, skip, skip, skip},
			OverlapQueue: {drop, hold, hold, hold},
		}},
		{"plan", "missed, not the latest, another run in flight", atPlan(PlanSituation{Missed: true, InFlight: true}), grid{
			OverlapAllow: {drop, drop, fire, spread},
			OverlapSkip:  {drop, drop, skip, skip},
			OverlapQueue: {drop, drop, hold, hold},
		}},
		// A released run waited; only "queue" holds runs, but the judgment
		// holds whatever the policy is now (it may have changed since).
		{"plan", "released from a hold, however late", atPlan(PlanSituation{Released: true, Missed: true}), same(fire)},

		{"launch", "within the launch grace", atLaunch(LaunchSituation{LaterDue: true}), same(fire)},
		{"launch", "late, no later run due", atLaunch(LaunchSituation{Late: true}), grid{
			OverlapAllow: {skip, fire, fire, fire},
			OverlapSkip:  {skip, fire, fire, fire},
			OverlapQueue: {skip, fire, fire, fire},
		}},
		{"launch", "late, a later run due too", atLaunch(LaunchSituation{Late: true, LaterDue: true}), grid{
			OverlapAllow: {skip, skip, fire, fire},
			// The scheduler recorded the later runs SKIPPED: this is the latest.
			OverlapSkip:  {skip, fire, fire, fire},
			OverlapQueue: {skip, skip, fire, fire},
		}},

		{"release", "behind a run that succeeded", atRelease(EndedRun{Status: RunSuccess}), same(fire)},
		{"release", "behind a run that failed", atRelease(EndedRun{Status: RunFailed}), same(fire)},
		{"release", "behind a run still started (RUN_TIMEOUT)", atRelease(EndedRun{Status: RunStarted}), same(fire)},
		{"release", "behind a run skipped as no longer planned", atRelease(EndedRun{Status: RunSkipped, Unplanned: true}), same(fire)},
		{"release", "behind an unstarted run being retried (RUN_TIMEOUT)", atRelease(EndedRun{Status: RunEnqueued, FailedAttempts: 2}), same(fire)},
		{"release", "behind an unstarted run a launcher holds (RUN_TIMEOUT)", atRelease(EndedRun{Status: RunEnqueued, Launching: true}), same(fire)},
		{"release", "behind a run skipped late at launch, itself missed", atRelease(EndedRun{Status: RunSkipped}), grid{
			OverlapAllow: {drop, fire, fire, spread},
			OverlapSkip:  {drop, fire, fire, spread},
			OverlapQueue: {drop, fire, fire, spread},
		}},
		{"release", "behind a run no launcher took (RUN_TIMEOUT), itself missed", atRelease(EndedRun{Status: RunEnqueued}), grid{
			OverlapAllow: {drop, fire, fire, spread},
			OverlapSkip:  {drop, fire, fire, spread},
			OverlapQueue: {drop, fire, fire, spread},
		}},
		{"release", "behind a run whose record is gone, itself missed", atRelease(EndedRun{}), grid{
			OverlapAllow: {drop, fire, fire, spread},
			OverlapSkip:  {drop, fire, fire, spread},
			OverlapQueue: {drop, fire, fire, spread},
		}},
	} {
		t.Run(tc.moment+"/"+tc.situation, func(t *testing.T) {
			t.Parallel()
			require.Len(t, tc.want, 3, "a row per overlap policy")
			for o, row := range tc.want {
				for i, c := range catchups {
					require.Equal(t, row[i], tc.decide(o, c), "%s, %s", o, c)
				}
			}
		})
	}
}

// A held backlog is missed however little late; other runs only past the
// grace.
func TestMissedBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		fire        time.Time
		heldBacklog bool
		missed      bool
	}{
		{now.Add(-11 * time.Second), false, true},
		{now.Add(-10 * time.Second), false, false},
		{now.Add(-9 * time.Second), false, false},
		{now.Add(-9 * time.Second), true, true},
		{now, true, true},
		{now.Add(time.Millisecond), true, false},
	} {
		t.Run(fmt.Sprintf("%s_backlog=%v", now.Sub(tc.fire), tc.heldBacklog), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.missed, tc.fire.Before(MissedBefore(now, 10*time.Second, tc.heldBacklog)))
		})
	}
}

// Every policy name keeps a defined answer: Keeps covers them all.
func TestKeepsCoversEveryCatchupPolicy(t *testing.T) {
	t.Parallel()
	want := map[CatchupPolicy]MissedRuns{CatchupNone: KeepNoMissed, CatchupLatest: KeepLatestMissed,
		CatchupFireImmediately: KeepAllMissed, CatchupSpread: KeepAllMissed}
	for _, c := range catchups {
		require.Equal(t, want[c], c.Keeps(), c)
	}
}
