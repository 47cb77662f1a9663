package main

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// chronosTestParallel is how many of this package's tests run at once
// unless -parallel says otherwise. Its long tests (the chaos tests, the
// abandoned run's recovery) spend minutes waiting on processes and on
// asynq's timers, not on CPU; at go test's default of GOMAXPROCS (2 on
// CI) they would run two at a time and the package would take as long as
// their sum instead of as long as the longest.
const chronosTestParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(chronosTestParallel, runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}
