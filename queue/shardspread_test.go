package queue_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// createRanges are the slot ranges redis-cli --cluster create gives n
// masters, in order (its clusterManagerCommandCreate): each the next
// 16384/n slots, the ends rounded, the last up to slot 16383. It returns
// each range's last slot.
func createRanges(n int) []int {
	per := float32(16384) / float32(n)
	lasts := make([]int, n)
	first, cursor := 0, float32(0)
	for i := range n {
		last := int(math.Round(float64(cursor + per - 1)))
		if last > 16384 || i == n-1 {
			last = 16383
		}
		last = max(last, first)
		lasts[i] = last
		first = last + 1
		cursor += per
	}
	return lasts
}

// shardsPerMaster returns the fewest and the most of shards shards a
// master of an n-master cluster holds, when the masters hold the slots
// as redis-cli --cluster create assigns them. A shard's keys are all in
// the slot of its tag (sNN).
func shardsPerMaster(shards, n int) (lo, hi int) {
	lasts := createRanges(n)
	count := make([]int, n)
	for s := range shards {
		slot := queuetest.Slot(queue.DueKey(s))
		m := 0
		for slot > lasts[m] {
			m++
		}
		count[m]++
	}
	lo, hi = shards, 0
	for _, c := range count {
		lo, hi = min(lo, c), max(hi, c)
	}
	return lo, hi
}

// TestShardsSpreadOverMastersAsDocumented pins the table of
// docs/operations.md "Sizing SHARDS for a cluster": how many shards each
// master holds, fewest to most, for SHARDS over N masters. The tags'
// slots are not spread evenly (s00 to s31 crowd a few ranges), which is
// why the guide asks for more shards than 4 per master.
func TestShardsSpreadOverMastersAsDocumented(t *testing.T) {
	t.Parallel()
	shards := []int{16, 32, 64, 128, 256}
	require.Equal(t, []int{5460, 10922, 16383}, createRanges(3), "redis-cli's ranges for 3 masters")
	documented := map[int][]string{
		3:  {"4–8", "8–15", "20–23", "39–46", "80–91"},
		4:  {"4–4", "8–8", "16–16", "32–32", "64–64"},
		6:  {"0–4", "1–8", "9–12", "18–25", "37–47"},
		8:  {"0–4", "0–8", "6–10", "10–22", "29–35"},
		12: {"0–4", "0–7", "4–7", "7–14", "17–27"},
		16: {"0–4", "0–5", "1–5", "5–15", "14–20"},
	}
	for n, want := range documented {
		for i, s := range shards {
			lo, hi := shardsPerMaster(s, n)
			require.Equal(t, want[i], fmt.Sprintf("%d–%d", lo, hi), "SHARDS=%d over %d masters", s, n)
		}
	}
}

// On a real 3-master cluster the shards' keys land on the masters as the
// table says: CLUSTER KEYSLOT agrees with the tag's slot, and the
// masters hold the slots as counted.
func TestShardsSpreadOverARealCluster(t *testing.T) {
	t.Parallel()
	c := queuetest.StartCluster(t)
	require.Len(t, c.Masters(t), 3)
	count := map[string]int{}
	for s := range 64 {
		count[c.MasterOf(t, queue.DueKey(s)).Addr]++
	}
	lo, hi := 64, 0
	for _, n := range count {
		lo, hi = min(lo, n), max(hi, n)
	}
	require.Len(t, count, 3)
	wantLo, wantHi := shardsPerMaster(64, 3)
	require.Equal(t, [2]int{wantLo, wantHi}, [2]int{lo, hi})
}
