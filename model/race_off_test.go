//go:build !race

package model

// raceEnabled: see race_on_test.go.
const raceEnabled = false
