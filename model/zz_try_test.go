package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestZZRobfig(t *testing.T) {
	for zi, z := range oracleZones {
		loc, _ := LoadZone(z)
		rng := rand.New(rand.NewPCG(7, uint64(zi)))
		g := exprGen{rng: rng}
		inst := oracleInstants(loc, rng)
		n := 0
		for i := 0; i < 400; i++ {
			at := inst[rng.IntN(len(inst))].Add(time.Duration(rng.Int64N(int64(72*time.Hour))) - 48*time.Hour).Truncate(time.Minute)
			e := g.expr(at.In(loc), DialectStandard, i%2 == 0)
			s, err := ParseCron(e, z, "", time.Time{})
			if err != nil {
				continue
			}
			c := s.(*CronSchedule)
			p, _ := robfigParser.Parse(e)
			spec := p.(*cron.SpecSchedule)
			spec.Location = loc
			want, ok := oracleNext(t, c, at, 200000)
			if !ok {
				continue
			}
			rb := spec.Next(at).UTC()
			if !rb.Equal(want) {
				n++
				if n < 4 {
					fmt.Printf("%s %q after %s: oracle %s robfig %s\n", z, e, at.In(loc).Format(time.RFC3339), want.In(loc), rb.In(loc))
				}
			}
		}
		fmt.Println(z, n)
	}
}
