package queuetest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildChronos builds the chronos binary of the module the caller runs in
// into dir and returns its path: multi-process tests and the benchmark
// run the real binary of the code under test, never a prebuilt one.
func BuildChronos(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD (the go command is needed to build chronos): %w", err)
	}
	bin := filepath.Join(dir, "chronos")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/chronos")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/chronos: %w\n%s", err, stderr.String())
	}
	return bin, nil
}
