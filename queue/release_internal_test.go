package queue

import (
	"context"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// TestLuaRanMatchesModel holds release.lua's ran() and model.EndedRun.Ran
// together: the release of a held run is judged in Lua, inside the script
// that ends the run before it, and the decision table lives in model.
func TestLuaRanMatchesModel(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	// ARGV: status ("" for a record gone), unplanned, failed attempts,
	// launching.
	script := joinScript([]byte(`
local st = ARGV[1]
if st == '' then st = nil end
if ran(st, ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4] == '1') then return 1 end
return 0`), mustRead(t, "unhold"), mustRead(t, "release"))
	statuses := []model.RunStatus{"", model.RunEnqueued, model.RunStarted, model.RunSuccess, model.RunFailed, model.RunSkipped}
	for _, st := range statuses {
		for _, unplanned := range []bool{false, true} {
			for _, att := range []int{0, 1} {
				for _, launching := range []bool{false, true} {
					e := model.EndedRun{Status: st, Unplanned: unplanned, FailedAttempts: att, Launching: launching}
					got, err := rdb.Eval(context.Background(), script, nil, string(st), flag(unplanned), att, flag(launching)).Int()
					require.NoError(t, err)
					require.Equal(t, e.Ran(), got == 1, "%+v", e)
				}
			}
		}
	}
}

func flag(b bool) string { return fmt.Sprint(map[bool]int{false: 0, true: 1}[b]) }

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	require.NoError(t, err)
	return b
}
