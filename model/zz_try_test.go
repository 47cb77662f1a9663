package model

import (
	"fmt"
	"testing"
	"time"
)

func TestZZTry(t *testing.T) {
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ e, z string }{{"0 9 * * *", "America/New_York"}, {"30 2 * * *", "America/New_York"}, {"30 1 * * *", "America/New_York"}, {"0 0 29 2 *", "UTC"}, {"*/5 * * * *", "Asia/Kathmandu"}, {"@every 90m", ""}, {"0 0 * * *", "America/Havana"}} {
		s, err := ParseCron(tc.e, tc.z, "", after)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(tc.e, tc.z, Preview(s, after, 3))
		a2 := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC)
		fmt.Println("  ", Preview(s, a2, 3))
		a3 := time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC)
		fmt.Println("  ", Preview(s, a3, 4))
	}
}
