package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the one maxmemory-policy chronos runs on: any other policy
// lets Redis delete schedules, run records and tasks without an error.
const NoEviction = "noeviction"

// ErrPolicyUnknown: Redis answered neither CONFIG GET nor INFO memory with
// its maxmemory-policy (both disabled, or an emulation such as miniredis).
var ErrPolicyUnknown = errors.New("maxmemory-policy unknown: Redis answers neither CONFIG GET nor INFO memory")

// EvictionPolicy reads Redis's maxmemory-policy: CONFIG GET, or INFO
// memory where CONFIG is disabled (managed services rename it).
func EvictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	cfg, cfgErr := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if p := cfg["maxmemory-policy"]; cfgErr == nil && p != "" {
		return p, nil
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		if IsUnavailable(err) {
			return "", fmt.Errorf("read maxmemory-policy: %w", err)
		}
		return "", fmt.Errorf("%w (CONFIG GET: %v; INFO memory: %v)", ErrPolicyUnknown, cfgErr, err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok && p != "" {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (CONFIG GET: %v; INFO memory has no maxmemory_policy)", ErrPolicyUnknown, cfgErr)
}

// CheckEvictionPolicy returns nil when Redis's maxmemory-policy is
// noeviction, and otherwise an error that says what is at stake and how
// to fix it. An unknown policy is an error wrapping ErrPolicyUnknown.
func CheckEvictionPolicy(ctx context.Context, rdb redis.UniversalClient) error {
	p, err := EvictionPolicy(ctx, rdb)
	if err != nil {
		return err
	}
	if p != NoEviction {
		return fmt.Errorf("Redis maxmemory-policy is %s: when it is full Redis evicts keys, deleting schedules, run records and tasks with no error; set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)", p)
	}
	return nil
}
