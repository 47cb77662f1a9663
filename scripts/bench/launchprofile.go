package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// mallocsOf sums the heap allocations the processes have made
// (go_memstats_mallocs_total): per run, a figure the machine's other
// load does not move.
func mallocsOf(ps []*proc) float64 {
	var sum float64
	for _, p := range ps {
		v, _ := p.metric("go_memstats_mallocs_total")
		sum += v
	}
	return sum
}

// launchProfile is a CPU profile of one launcher through a launch round
// (-launch-profile), read from its /debug/pprof (PPROF=true).
type launchProfile struct {
	p    *proc
	dir  string
	name string
	done chan error
}

// launchProfileSeconds is how long the CPU profile runs: shorter than a
// launch of 20,000 runs on this machine, so the profile holds the load.
const launchProfileSeconds = 2

func startLaunchProfile(ctx context.Context, p *proc, dir string, n, launchers int) *launchProfile {
	lp := &launchProfile{p: p, dir: dir, name: fmt.Sprintf("launch-%d-x%d-%d", n, launchers, time.Now().Unix()), done: make(chan error, 1)}
	go func() {
		lp.done <- lp.fetch(ctx, fmt.Sprintf("profile?seconds=%d", launchProfileSeconds), lp.name+"-cpu.pprof")
	}()
	return lp
}

// finish waits for the CPU profile and writes the allocations' profile.
func (lp *launchProfile) finish(ctx context.Context, e *env) {
	if err := <-lp.done; err != nil {
		e.logf("launch profile: %v", err)
	}
	if err := lp.fetch(ctx, "allocs", lp.name+"-allocs.pprof"); err != nil {
		e.logf("launch profile: %v", err)
	}
	e.logf("launch profile: %s", filepath.Join(lp.dir, lp.name+"-{cpu,allocs}.pprof"))
}

func (lp *launchProfile) fetch(ctx context.Context, path, file string) error {
	if err := os.MkdirAll(lp.dir, 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+lp.p.httpAddr+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/%s: %s", path, resp.Status)
	}
	f, err := os.Create(filepath.Join(lp.dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
