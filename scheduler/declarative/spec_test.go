package declarative

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Conformance tests, one or more per MUST of the declarative scheduler's
// specification, named after the requirement. Each runs on a real Redis
// with the fake clock; b.advance moves time and waits for the scheduler
// to act on it.

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC) // a Monday

var ctx = context.Background()

func TestSpec_API_EveryEventInOrderForARun(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(5*time.Second))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"report", "0 10 * * *", ok, time.Minute}}))
	b.advance(t, t0.Add(5*time.Second), s)
	require.NoError(t, s.Stop(ctx))
	require.Equal(t, []EventType{
		SchedulerInitializationStarted, PollingStarted, SchedulerInitializationCompleted,
		TaskRunStarted, TaskRunCompleted,
		SchedulerStopRequested, PollingStopRequested, PollingStopped, SchedulerStopped,
	}, b.ev.types(""))
	for _, ev := range b.ev.all()[1:] { // the first comes before the identifier is read
		require.NotEmpty(t, ev.SchedulerID, ev.Type)
	}
}

func TestSpec_Time_EvaluatesEachMinuteBoundary(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(-30*time.Second))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"half", "0,30 * * * *", ok, 0}}))
	b.walk(t, t0.Add(90*time.Minute), s)
	require.Equal(t, []time.Time{t0, t0.Add(30 * time.Minute), t0.Add(60 * time.Minute), t0.Add(90 * time.Minute)}, b.ev.starts("half"))
}

func TestSpec_Time_HostLocalZoneByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s, err := New(Options{Redis: b.rdb})
	require.NoError(t, err)
	require.Equal(t, time.Local, s.loc)
	require.Equal(t, hostClock{}, s.clock)
}

func TestSpec_DST_SpringForward_SkippedMinuteNeverRuns(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	b := setup(t, time.Date(2026, 3, 8, 1, 0, 0, 0, ny))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"two-thirty", "30 2 * * *", ok, 0}, {"three", "0 3 * * *", ok, 0}}))
	// 02:00-02:59 does not exist on 2026-03-08 in New York.
	b.walk(t, time.Date(2026, 3, 8, 4, 0, 0, 0, ny), s)
	require.Empty(t, b.ev.starts("two-thirty"))
	require.Equal(t, []time.Time{time.Date(2026, 3, 8, 3, 0, 0, 0, ny).UTC()}, utc(b.ev.starts("three")))
	// The next day runs as usual, without a restart.
	b.advance(t, time.Date(2026, 3, 9, 2, 30, 0, 0, ny), s)
	require.Equal(t, []time.Time{time.Date(2026, 3, 9, 2, 30, 0, 0, ny).UTC()}, utc(b.ev.starts("two-thirty")))
}

func TestSpec_DST_FallBack_RepeatedMinuteRunsTwice(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	b := setup(t, time.Date(2026, 11, 1, 0, 0, 0, 0, ny))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"one-thirty", "30 1 * * *", ok, 0}}))
	b.walk(t, time.Date(2026, 11, 1, 3, 0, 0, 0, ny), s)
	first := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC) // 01:30 EDT
	require.Equal(t, []time.Time{first, first.Add(time.Hour)}, utc(b.ev.starts("one-thirty")))
	// And once the next day.
	b.advance(t, time.Date(2026, 11, 2, 1, 30, 0, 0, ny), s)
	require.Len(t, b.ev.starts("one-thirty"), 3)
}

func TestSpec_NoMakeUp_FourMissedRunsYieldOne(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	regs := []Registration{{"quarter", "15,30,45,0 * * * *", ok, 0}}
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, regs))
	b.advance(t, t0.Add(time.Second), s1)
	require.NoError(t, s1.Stop(ctx))
	require.Len(t, b.ev.starts("quarter"), 1)

	// A one-hour outage misses 10:15, 10:30, 10:45 and 11:00.
	b.clock.Set(t0.Add(65 * time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, regs))
	b.walk(t, t0.Add(74*time.Minute), s2)
	require.Equal(t, []time.Time{t0, t0.Add(65 * time.Minute)}, b.ev.starts("quarter"))
	b.advance(t, t0.Add(75*time.Minute), s2)
	require.Equal(t, []time.Time{t0, t0.Add(65 * time.Minute), t0.Add(75 * time.Minute)}, b.ev.starts("quarter"))
}

func TestSpec_NoMakeUp_MissedWhileRunningRunsOnceAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	first := true
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"slow", "* * * * *", func(context.Context) error {
		if first {
			first = false
			calls.Done()
			<-release
		}
		return nil
	}, 0}}))
	calls.Wait()
	// Three occurrences pass while the first run holds the task.
	for i := 1; i <= 3; i++ {
		b.clock.Set(t0.Add(time.Duration(i) * time.Minute))
	}
	require.Len(t, b.ev.starts("slow"), 1, "a task runs serially")
	close(release)
	b.advance(t, t0.Add(3*time.Minute+30*time.Second), s)
	require.Len(t, b.ev.starts("slow"), 2, "the missed occurrences run once")
}

func TestSpec_FirstStart_RunsImmediatelyIffMinuteMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(42*time.Second))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{
		{"matches", "0 10 * * *", ok, 0},
		{"later", "5 10 * * *", ok, 0},
	}))
	b.advance(t, t0.Add(42*time.Second), s)
	require.Equal(t, []time.Time{t0.Add(42 * time.Second)}, b.ev.starts("matches"))
	require.Empty(t, b.ev.starts("later"), "a first start does not run a task whose minute has not come")
	b.walk(t, t0.Add(5*time.Minute), s)
	require.Equal(t, []time.Time{t0.Add(5 * time.Minute)}, b.ev.starts("later"))
}

func TestSpec_FirstStart_NeverRunTaskIsNotMadeUp(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(time.Minute))
	regs := []Registration{{"nightly", "0 10 * * *", ok, 0}}
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, regs))
	require.NoError(t, s1.Stop(ctx))
	// Down over its first occurrence: it has never run, so no make-up.
	b.clock.Set(t0.Add(24*time.Hour + 5*time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, regs))
	b.advance(t, t0.Add(24*time.Hour+5*time.Minute), s2)
	require.Empty(t, b.ev.starts("nightly"))
	b.advance(t, t0.Add(48*time.Hour), s2)
	require.Len(t, b.ev.starts("nightly"), 1)
}

func TestSpec_Restart_ContinuesFromPersistedState(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	regs := []Registration{{"hourly", "0 * * * *", ok, 0}}
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, regs))
	b.advance(t, t0, s1)
	require.NoError(t, s1.Stop(ctx))
	st := b.state(t, "hourly")
	require.Equal(t, msStr(t0), st[fieldAttempt])
	require.Equal(t, msStr(t0), st[fieldSuccess])
	require.Equal(t, msStr(t0), st[fieldServed])

	b.clock.Set(t0.Add(30 * time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, regs))
	b.walk(t, t0.Add(60*time.Minute), s2)
	require.Equal(t, []time.Time{t0, t0.Add(time.Hour)}, b.ev.starts("hourly"))
}

func TestSpec_Retry_FailedRunRetriesAfterRetryDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	fails := 1
	var mu sync.Mutex
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"flaky", "0 * * * *", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return errors.New("boom")
		}
		return nil
	}, 10 * time.Second}}))
	b.advance(t, t0, s)
	st := b.state(t, "flaky")
	require.Equal(t, msStr(t0.Add(10*time.Second)), st[fieldRetry], "AwaitingRetry until now + retryDelay")
	require.Equal(t, msStr(t0), st[fieldFailure])
	b.advance(t, t0.Add(9*time.Second), s)
	require.Len(t, b.ev.starts("flaky"), 1)
	b.advance(t, t0.Add(10*time.Second), s)
	require.Equal(t, []EventType{TaskRunStarted, TaskRunFailed, TaskRetryStarted, TaskRunCompleted}, b.ev.types("flaky"))
	st = b.state(t, "flaky")
	require.NotContains(t, st, fieldRetry)
	require.Equal(t, msStr(t0.Add(10*time.Second)), st[fieldSuccess])
	var failed Event
	for _, ev := range b.ev.all() {
		if ev.Type == TaskRunFailed {
			failed = ev
		}
	}
	require.EqualError(t, failed.Err, "boom")
	require.Equal(t, t0.Add(10*time.Second), failed.RetryAt)
}

func TestSpec_Retry_DueOccurrencePreemptsPendingRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	n := 0
	var mu sync.Mutex
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"minutely", "* * * * *", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return errors.New("boom")
		}
		return nil
	}, 10 * time.Minute}}))
	b.advance(t, t0, s)
	b.advance(t, t0.Add(time.Minute), s)
	require.Equal(t, []EventType{TaskRunStarted, TaskRunFailed, TaskRetryPreempted, TaskRunStarted, TaskRunCompleted}, b.ev.types("minutely"))
	require.NotContains(t, b.state(t, "minutely"), fieldRetry)
	// The preempted retry does not run later.
	b.advance(t, t0.Add(10*time.Minute+30*time.Second), s)
	require.Zero(t, b.ev.count("minutely", TaskRetryStarted))
}

func TestSpec_Retry_PendingRetrySurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, []Registration{{"flaky", "0 * * * *", func(context.Context) error { return errors.New("boom") }, 5 * time.Minute}}))
	b.advance(t, t0, s1)
	require.NoError(t, s1.Stop(ctx))
	b.clock.Set(t0.Add(time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, []Registration{{"flaky", "0 * * * *", ok, 5 * time.Minute}}))
	b.advance(t, t0.Add(5*time.Minute), s2)
	require.Equal(t, []EventType{TaskRunStarted, TaskRunFailed, TaskRetryStarted, TaskRunCompleted}, b.ev.types("flaky"))
}

func TestSpec_Override_NewTaskIsPersistedWithFirstStartSemantics(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(3*time.Minute))
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"fresh", "0 10 * * *", ok, 90 * time.Second}}))
	st := b.state(t, "fresh")
	require.Equal(t, "fresh", st[fieldName])
	require.Equal(t, "0 10 * * *", st[fieldCron])
	require.Equal(t, "90000", st[fieldRetryDelay])
	require.Equal(t, s.schedulerID(), st[fieldConfiguredBy])
	require.NotContains(t, st, fieldAttempt)
	b.advance(t, t0.Add(3*time.Minute), s)
	require.Empty(t, b.ev.starts("fresh"))
}

func TestSpec_Override_PreservedTaskKeepsStateUntouched(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	regs := []Registration{{"keep", "0 * * * *", ok, time.Second}}
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, regs))
	b.advance(t, t0, s1)
	require.NoError(t, s1.Stop(ctx))
	before := b.state(t, "keep")
	b.clock.Set(t0.Add(10 * time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, regs))
	b.advance(t, t0.Add(10*time.Minute), s2)
	require.Equal(t, before, b.state(t, "keep"))
	require.Len(t, b.ev.starts("keep"), 1)
}

func TestSpec_Override_OverriddenTaskKeepsHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, []Registration{{"job", "0 * * * *", ok, time.Second}}))
	b.advance(t, t0, s1)
	require.NoError(t, s1.Stop(ctx))
	b.clock.Set(t0.Add(10 * time.Minute))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, []Registration{{"job", "20 * * * *", ok, 2 * time.Second}}))
	st := b.state(t, "job")
	require.Equal(t, "20 * * * *", st[fieldCron])
	require.Equal(t, "2000", st[fieldRetryDelay])
	require.Equal(t, msStr(t0), st[fieldAttempt], "history is kept")
	require.Equal(t, msStr(t0), st[fieldSuccess])
	b.walk(t, t0.Add(20*time.Minute), s2)
	require.Equal(t, []time.Time{t0, t0.Add(20 * time.Minute)}, b.ev.starts("job"))
}

func TestSpec_Override_OrphanedTaskRestartsImmediately(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, []Registration{{"job", "0 * * * *", ok, 0}}))
	b.advance(t, t0, s1)
	require.NoError(t, s1.Stop(ctx))
	// A previous instance started the task and died mid-run: its lease is
	// still in the record and has lapsed.
	require.NoError(t, b.rdb.HSet(ctx, taskKey(b.ns, "job"), fieldLeaseHolder, "dead-host:1:abc", fieldLeaseUntil, msStr(t0.Add(time.Minute))).Err())
	b.clock.Set(t0.Add(7*time.Minute + 10*time.Second))
	s2 := b.newScheduler(t)
	require.NoError(t, s2.Initialize(ctx, []Registration{{"job", "0 * * * *", ok, 0}}))
	b.advance(t, t0.Add(7*time.Minute+10*time.Second), s2)
	require.Equal(t, []time.Time{t0, t0.Add(7*time.Minute + 10*time.Second)}, b.ev.starts("job"))
	var orphan bool
	for _, ev := range b.ev.all() {
		orphan = orphan || ev.Orphan
	}
	require.True(t, orphan)
	require.NotContains(t, b.state(t, "job"), fieldLeaseHolder)
}

func TestSpec_Override_LiveLeaseOfDeadHolderIsRestartedWhenItLapses(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(30*time.Second))
	require.NoError(t, b.rdb.HSet(ctx, taskKey(b.ns, "job"), fieldName, "job", fieldCron, "* * * * *", fieldRetryDelay, "0",
		fieldServed, msStr(t0), fieldAttempt, msStr(t0), fieldLeaseHolder, "dead-host:1:abc", fieldLeaseUntil, msStr(t0.Add(2*time.Minute))).Err())
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"job", "* * * * *", ok, 0}}))
	b.advance(t, t0.Add(90*time.Second), s)
	require.Empty(t, b.ev.starts("job"), "the lease is live: its holder may still run it")
	b.advance(t, t0.Add(2*time.Minute+time.Second), s)
	require.Equal(t, []time.Time{t0.Add(2*time.Minute + time.Second)}, b.ev.starts("job"))
}

func TestSpec_Override_AtomicRollbackOnPersistenceFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, t0.Add(5*time.Minute))
	old := []Registration{{"a", "0 * * * *", ok, 0}, {"b", "0 * * * *", ok, 0}, {"c", "0 * * * *", ok, 0}}
	s1 := b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, old))
	require.NoError(t, s1.Stop(ctx))
	before := map[string]map[string]string{}
	for _, r := range old {
		before[r.Name] = b.state(t, r.Name)
	}

	hook := &failingTx{failAt: 2}
	b.rdb.AddHook(hook)
	s2 := b.newScheduler(t)
	s2.batch = 2
	err := s2.Initialize(ctx, []Registration{
		{"a", "1 * * * *", ok, 0}, {"b", "1 * * * *", ok, 0}, {"c", "1 * * * *", ok, 0}, {"d", "1 * * * *", ok, 0},
	})
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, 3, int(hook.n.Load()), "the second batch failed after the first was applied, and one more transaction restored it")
	for _, r := range old {
		require.Equal(t, before[r.Name], b.state(t, r.Name), "task %s restored", r.Name)
	}
	require.Empty(t, b.state(t, "d"), "a new task's record is removed again")
	require.Equal(t, []EventType{SchedulerInitializationStarted, SchedulerInitializationFailed}, b.ev.types("")[len(b.ev.types(""))-2:])
	require.Equal(t, stateUninitialized, s2.state)
}

func TestSpec_Idempotency_RepeatedInitializeSchedulesNothingTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	regs := []Registration{{"job", "* * * * *", ok, 0}}
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, regs))
	b.advance(t, t0.Add(10*time.Second), s)
	require.NoError(t, s.Stop(ctx))
	before := b.state(t, "job")
	require.NoError(t, s.Initialize(ctx, regs))
	b.advance(t, t0.Add(20*time.Second), s)
	require.Len(t, b.ev.starts("job"), 1, "the same minute is not run twice")
	require.Equal(t, before, b.state(t, "job"))
	b.advance(t, t0.Add(time.Minute), s)
	require.Len(t, b.ev.starts("job"), 2)
}

func TestSpec_Determinism_TwoInstancesSelectOneRunPerMinute(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	var regs []Registration
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, n := range names {
		regs = append(regs, Registration{n, "* * * * *", ok, 0})
	}
	s1, s2 := b.newScheduler(t), b.newScheduler(t)
	require.NoError(t, s1.Initialize(ctx, regs))
	require.NoError(t, s2.Initialize(ctx, regs))
	for m := 1; m <= 5; m++ {
		b.advance(t, t0.Add(time.Duration(m)*time.Minute), s1, s2)
	}
	for _, n := range names {
		require.Len(t, b.ev.starts(n), 6, "task %s: once per minute between both instances", n)
	}
}

func TestSpec_Concurrency_TasksRunInParallel(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	var both sync.WaitGroup
	both.Add(2)
	cb := func(context.Context) error {
		both.Done()
		both.Wait() // returns only if the other task runs at the same time
		return nil
	}
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"x", "* * * * *", cb, 0}, {"y", "* * * * *", cb, 0}}))
	b.advance(t, t0, s)
	require.Equal(t, 1, b.ev.count("x", TaskRunCompleted))
	require.Equal(t, 1, b.ev.count("y", TaskRunCompleted))
}

func TestSpec_Concurrency_PanicOrFailureDoesNotAffectOtherTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{
		{"panics", "* * * * *", func(context.Context) error { panic("kaboom") }, time.Hour},
		{"fails", "* * * * *", func(context.Context) error { return errors.New("nope") }, time.Hour},
		{"fine", "* * * * *", ok, 0},
	}))
	b.advance(t, t0.Add(time.Minute), s)
	require.Equal(t, 2, b.ev.count("fine", TaskRunCompleted))
	require.Equal(t, 2, b.ev.count("panics", TaskRunFailed))
	require.Equal(t, 1, b.ev.count("panics", TaskRetryPreempted))
	var pe *PanicError
	for _, ev := range b.ev.all() {
		if ev.Task == "panics" && ev.Type == TaskRunFailed {
			require.ErrorAs(t, ev.Err, &pe)
			require.Equal(t, "kaboom", pe.Value)
		}
	}
}

func TestSpec_Reentrancy_ConcurrentInitializeOnlyFirstProceeds(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s, err := New(Options{Redis: b.rdb, Namespace: b.ns, Clock: b.clock, Location: time.UTC, OnEvent: func(ev Event) {
		if ev.Type == SchedulerInitializationStarted {
			once.Do(func() { close(entered); <-release })
		}
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop(ctx) })
	first := make(chan error, 1)
	go func() { first <- s.Initialize(ctx, []Registration{{"a", "* * * * *", ok, 0}}) }()
	<-entered
	err = s.Initialize(ctx, []Registration{{"a", "* * * * *", ok, 0}})
	var active *SchedulerAlreadyActiveError
	require.ErrorAs(t, err, &active)
	require.Equal(t, "initializing", active.CurrentState)
	require.EqualError(t, err, "Cannot initialize scheduler: scheduler is already initializing")
	close(release)
	require.NoError(t, <-first)
	err = s.Initialize(ctx, []Registration{{"a", "* * * * *", ok, 0}})
	require.ErrorAs(t, err, &active)
	require.Equal(t, "running", active.CurrentState)
	require.Equal(t, "SchedulerAlreadyActiveError", active.Name())
}

func TestSpec_Reentrancy_StopDuringInitializeWaitsForIt(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rec := &recorder{}
	s, err := New(Options{Redis: b.rdb, Namespace: b.ns, Clock: b.clock, Location: time.UTC, OnEvent: func(ev Event) {
		rec.add(ev)
		if ev.Type == SchedulerInitializationStarted {
			once.Do(func() { close(entered); <-release })
		}
	}})
	require.NoError(t, err)
	initDone := make(chan error, 1)
	go func() { initDone <- s.Initialize(ctx, []Registration{{"a", "0 0 1 1 *", ok, 0}}) }()
	<-entered
	stops := make(chan error, 3)
	for range 3 { // stop may be called concurrently
		go func() { stops <- s.Stop(ctx) }()
	}
	close(release)
	require.NoError(t, <-initDone)
	for range 3 {
		require.NoError(t, <-stops)
	}
	require.Equal(t, []EventType{
		SchedulerInitializationStarted, PollingStarted, SchedulerInitializationCompleted,
		SchedulerStopRequested, PollingStopRequested, PollingStopped, SchedulerStopped,
	}, rec.types(""))
}

func TestSpec_Resources_StopWaitsForRunningCallbacks(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	started, release := make(chan struct{}), make(chan struct{})
	finished := false
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"slow", "* * * * *", func(context.Context) error {
		close(started)
		<-release
		finished = true
		return nil
	}, 0}}))
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()
	require.Never(t, func() bool { return len(stopped) > 0 }, 100*time.Millisecond, 5*time.Millisecond)
	close(release)
	require.NoError(t, <-stopped)
	require.True(t, finished)
	require.Equal(t, SchedulerStopped, b.ev.types("")[len(b.ev.types(""))-1])
	require.NotContains(t, b.state(t, "slow"), fieldLeaseHolder, "the lease is released")
}

func TestSpec_Resources_StopContextCancelsCallbacks(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	started := make(chan struct{})
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{{"stuck", "* * * * *", func(c context.Context) error {
		close(started)
		<-c.Done()
		return c.Err()
	}, 0}}))
	<-started
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Stop(sctx), context.DeadlineExceeded)
	require.Eventually(t, func() bool { return b.ev.count("stuck", TaskRunFailed) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Stop(ctx))
}

func TestSpec_Polling_StartsWithTheFirstTaskOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s := b.newScheduler(t)
	require.NoError(t, s.Initialize(ctx, []Registration{}))
	require.NoError(t, s.Stop(ctx))
	require.Equal(t, []EventType{SchedulerInitializationStarted, SchedulerInitializationCompleted, SchedulerStopRequested, SchedulerStopped}, b.ev.types(""))
}

// utc converts times to UTC for comparison.
func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func TestSpec_Lifecycle_FailedInitializeReturnsToUninitialized(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	s := b.newScheduler(t)
	var dup *ScheduleDuplicateTaskError
	require.ErrorAs(t, s.Initialize(ctx, []Registration{{"a", "* * * * *", ok, 0}, {"a", "* * * * *", ok, 0}}), &dup)
	require.NoError(t, s.Stop(ctx), "stopping an uninitialized scheduler is a no-op")
	require.NoError(t, s.Initialize(ctx, []Registration{{"a", "* * * * *", ok, 0}}), "a failed Initialize can be retried")
	b.advance(t, t0, s)
	require.Len(t, b.ev.starts("a"), 1)
}

func TestNew_RejectsMissingRedisAndShortLease(t *testing.T) {
	t.Parallel()
	_, err := New(Options{})
	require.EqualError(t, err, "declarative: Options.Redis is required")
	b := setup(t, t0)
	_, err = New(Options{Redis: b.rdb, LeaseTTL: time.Millisecond})
	require.EqualError(t, err, "declarative: Options.LeaseTTL 1ms is below 1s")
}
