//go:build race

package model

// raceEnabled: this test binary runs under the race detector. The oracle
// tests are single-goroutine arithmetic, which the detector slows about
// fivefold without anything to find; under it they check a sample, and
// `make test` runs them in full without it (see the Makefile).
const raceEnabled = true
