package queuetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// built is the chronos binary BuildChronos built in this process, which
// later calls link into their directory instead of building again: a
// go build that finds everything cached still links, seconds of CPU that
// each multi-process test paid.
var built struct {
	mu  sync.Mutex
	bin string
}

// BuildChronos builds the chronos binary of the module the caller runs in
// into dir and returns its path: multi-process tests and the benchmark
// run the real binary of the code under test, never a prebuilt one. It
// builds once per process; later calls get a link to that build.
func BuildChronos(ctx context.Context, dir string) (string, error) {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.bin == "" {
		sweepLentDirs()
		buildDir, err := os.MkdirTemp("", fmt.Sprintf("chronos-queuetest-%d-", os.Getpid()))
		if err != nil {
			return "", err
		}
		bin, err := buildChronos(ctx, buildDir)
		if err != nil {
			_ = os.RemoveAll(buildDir)
			return "", err
		}
		built.bin = bin
	}
	bin := filepath.Join(dir, "chronos")
	if err := os.Link(built.bin, bin); err != nil {
		if err := copyFile(built.bin, bin); err != nil {
			return "", fmt.Errorf("copy the chronos binary into %s: %w", dir, err)
		}
	}
	return bin, nil
}

func buildChronos(ctx context.Context, dir string) (string, error) {
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

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
