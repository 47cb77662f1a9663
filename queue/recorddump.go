package queue

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// A run record written by HSET costs Redis an append to the hash's
// listpack per field and value, each a reallocation, after a search of
// the fields already there, and the parsing of two arguments per field:
// about a fifth of what a cold burst's run costs it (docs/perf/cold-burst.md).
// RESTORE builds the same hash from one argument, the listpack Redis would
// have built, as DUMP serializes it: Redis copies it in whole. The
// payload's format is Redis's RDB encoding of a hash in a listpack (type
// 16, RDB version 10, Redis 7.0 on; later versions load it as they load
// any older dump). A scheduler's first fast commit checks it on the
// server (restoresRecords): a record it RESTOREs must DUMP byte for byte
// as the same record made by HSET does; otherwise, or on a server older
// than 7.0, records are written by HSET as before.

const (
	rdbTypeHashListpack = 16 // RDB_TYPE_HASH_LISTPACK
	rdbVersionListpack  = 10 // the first RDB version with it (Redis 7.0)
	// dumpValueMax is the longest field or value a record is RESTOREd
	// with: Redis's hash-max-listpack-value default, past which HSET
	// would make a hash table, which RESTORE of a listpack would not.
	dumpValueMax = 64
)

// crcJones is Redis's CRC-64 (Jones polynomial, reflected, init 0): the
// checksum at the end of a DUMP payload.
var crcJones = crc64.MakeTable(0x95ac9329ac4bc9b5)

func redisCRC64(p []byte) uint64 {
	// hash/crc64 complements before and after; Redis's starts at 0 and
	// does not.
	return ^crc64.Update(^uint64(0), crcJones, p)
}

// hashDump builds a hash's DUMP payload, its fields and values appended
// in order as HSET would append them to a new hash.
type hashDump struct {
	lp []byte // the listpack, header first
	n  int    // fields and values so far
}

func (h *hashDump) reset() {
	h.lp = append(h.lp[:0], 0, 0, 0, 0, 0, 0) // total bytes, count: set by appendTo
	h.n = 0
}

// str appends s as listpack stores it: an integer if Redis reads it as
// one (lpStringToInt64), else a string.
func (h *hashDump) str(s string) {
	if v, ok := lpInt(s); ok {
		h.int(v)
		return
	}
	start := len(h.lp)
	switch n := len(s); {
	case n < 64:
		h.lp = append(h.lp, 0x80|byte(n))
	case n < 4096:
		h.lp = append(h.lp, 0xE0|byte(n>>8), byte(n))
	default:
		h.lp = append(h.lp, 0xF0, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	h.lp = append(h.lp, s...)
	h.backlen(len(h.lp) - start)
}

// int appends v in listpack's smallest integer encoding.
func (h *hashDump) int(v int64) {
	start := len(h.lp)
	switch {
	case v >= 0 && v <= 127:
		h.lp = append(h.lp, byte(v))
	case v >= -4096 && v <= 4095:
		u := uint64(v) & (1<<13 - 1)
		h.lp = append(h.lp, 0xC0|byte(u>>8), byte(u))
	case v >= -32768 && v <= 32767:
		h.lp = append(h.lp, 0xF1, byte(v), byte(v>>8))
	case v >= -8388608 && v <= 8388607:
		h.lp = append(h.lp, 0xF2, byte(v), byte(v>>8), byte(v>>16))
	case v >= -2147483648 && v <= 2147483647:
		h.lp = append(h.lp, 0xF3, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	default:
		h.lp = append(h.lp, 0xF4)
		h.lp = binary.LittleEndian.AppendUint64(h.lp, uint64(v))
	}
	h.backlen(len(h.lp) - start)
}

// backlen appends an entry's length, read backwards, 7 bits a byte.
func (h *hashDump) backlen(l int) {
	switch {
	case l <= 127:
		h.lp = append(h.lp, byte(l))
	case l < 16383:
		h.lp = append(h.lp, byte(l>>7), byte(l&127)|128)
	default:
		h.lp = append(h.lp, byte(l>>14), byte((l>>7)&127)|128, byte(l&127)|128)
	}
	h.n++
}

// appendTo appends the DUMP payload of the hash built so far to dst:
// type, the listpack as an RDB string, the RDB version and the checksum.
func (h *hashDump) appendTo(dst []byte) []byte {
	h.lp = append(h.lp, 0xFF)
	binary.LittleEndian.PutUint32(h.lp, uint32(len(h.lp)))
	binary.LittleEndian.PutUint16(h.lp[4:], uint16(min(h.n, 65535)))
	start := len(dst)
	dst = append(dst, rdbTypeHashListpack)
	switch n := len(h.lp); {
	case n < 1<<6:
		dst = append(dst, byte(n))
	case n < 1<<14:
		dst = append(dst, 0x40|byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	dst = append(dst, h.lp...)
	dst = binary.LittleEndian.AppendUint16(dst, rdbVersionListpack)
	return binary.LittleEndian.AppendUint64(dst, redisCRC64(dst[start:]))
}

// lpInt reads s as Redis's listpack does (lpStringToInt64): a canonical
// decimal int64, no sign but '-', no leading zero, under 21 bytes.
func lpInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	d := s
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// restoresRecords says whether TickDue's fast path RESTOREs run
// records. The server is probed (restoreBuildsRecords) at the first
// call, a scheduler's first fast commit, not in NewStore: API and
// launcher processes never RESTORE, and need not pay the probe's round
// trip and keys at every start.
func (s *Store) restoresRecords(ctx context.Context) bool {
	s.restoreProbe.Do(func() {
		s.restoreRecords.Store(s.watchSeesWrites && restoreBuildsRecords(context.WithoutCancel(ctx), s.rdb))
	})
	return s.restoreRecords.Load()
}

// restoreBuildsRecords says whether the server builds a run record from
// hashDump's payload exactly as from HSET: a probe record written both
// ways must DUMP to the same bytes. It writes two short-lived keys of its
// own. A server that refuses RESTORE or DUMP (an ACL, an older Redis)
// answers false, not an error.
func restoreBuildsRecords(ctx context.Context, rdb redis.UniversalClient) bool {
	pfx := keyPrefix + "probe:restore:{" + rand.Text() + "}:"
	byHSET, byRestore := pfx+"hset", pfx+"restore"
	defer rdb.Del(context.WithoutCancel(ctx), byHSET, byRestore)
	// A record's kinds of value: a short string, integers of every size
	// listpack encodes, a number it keeps as a string, an empty string.
	fv := []string{rfSchedule, "sched-1", rfRunAt, "1767225600000", rfFireAt, "-1", rfStatus, stEnqueued,
		rfCreated, "0", rfUpdated, "127", rfSource, srcSchedule, rfError, "", rfReason, "007",
		rfAttempts, "4095", rfRetryAt, "-32768", rfLastErr, "8388607", rfRunID, "-2147483648", rfRequest, "9223372036854775807",
		"x", "-9223372036854775808", "y", "18446744073709551616"}
	var h hashDump
	h.reset()
	args := make([]any, 0, 2+len(fv))
	args = append(args, "HSET", byHSET)
	for _, s := range fv {
		h.str(s)
		args = append(args, s)
	}
	payload := h.appendTo(nil)
	var want, got *redis.StringCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, args...)
		p.Expire(ctx, byHSET, time.Minute) // left behind only by a crash
		p.RestoreReplace(ctx, byRestore, time.Minute, string(payload))
		want, got = p.Dump(ctx, byHSET), p.Dump(ctx, byRestore)
		return nil
	})
	return err == nil && want.Val() != "" && bytes.Equal([]byte(want.Val()), []byte(got.Val()))
}

// dumpFits says whether a record of these values may be RESTOREd: none
// longer than dumpValueMax.
func dumpFits(vals ...string) bool {
	for _, v := range vals {
		if len(v) > dumpValueMax {
			return false
		}
	}
	return true
}

// runDumpSize is about how long a run record's payload is.
const runDumpSize = 128

// appendRunDump appends to dst the payload of a new run record of
// schedule sid, with the fields in the order commitFast's HSET gives
// them (run_create in run_record.lua: the same record).
func appendRunDump(dst []byte, h *hashDump, sid string, at, fire int64, st string, now int64, err, rsn string) []byte {
	h.reset()
	h.str(rfSchedule)
	h.str(sid)
	h.str(rfRunAt)
	h.int(at)
	h.str(rfFireAt)
	h.int(fire)
	h.str(rfStatus)
	h.str(st)
	h.str(rfCreated)
	h.int(now)
	h.str(rfUpdated)
	h.int(now)
	h.str(rfSource)
	h.str(srcSchedule)
	if err != "" {
		h.str(rfError)
		h.str(err)
	}
	if rsn != "" {
		h.str(rfReason)
		h.str(rsn)
	}
	if st == stEnqueued {
		h.str(rfEnqueued)
		h.int(now)
	}
	return h.appendTo(dst)
}

// appendRunHSET appends the HSET that writes run r's new record at rk,
// of schedule id, at nowMS: the same record as appendRunDump's.
func appendRunHSET(args []any, rk string, id any, r *PlannedRun, nowMS any) []any {
	args = append(args, "HSET", rk, rfSchedule, id, rfRunAt, ms(r.RunAt), rfFireAt, ms(r.FireAt), rfStatus, statusArg(r.Status),
		rfCreated, nowMS, rfUpdated, nowMS, rfSource, srcSchedule)
	if r.Error != "" {
		args = append(args, rfError, r.Error)
	}
	if r.Reason != "" {
		args = append(args, rfReason, string(r.Reason))
	}
	if r.Status == model.RunEnqueued {
		args = append(args, rfEnqueued, nowMS)
	}
	return args
}

// restored is a run record commitFast RESTOREd: the command, and what
// writes the record by HSET if it failed.
type restored struct {
	cmd *redis.Cmd
	rk  string
	id  any
	r   *PlannedRun
}

// restoreRefused says whether the server answered one of restores with
// an error: not a lost connection, the server's own reply.
func restoreRefused(restores []restored) bool {
	for _, rs := range restores {
		var rerr redis.Error
		if errors.As(rs.cmd.Err(), &rerr) {
			return true
		}
	}
	return false
}

// restoreFailed writes by HSET the records whose RESTORE failed in a
// transaction that ran.
func (s *Store) restoreFailed(ctx context.Context, restores []restored, nowMS any) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, rs := range restores {
			if rs.cmd.Err() != nil {
				p.Do(ctx, appendRunHSET(nil, rs.rk, rs.id, rs.r, nowMS)...)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write run records by HSET after a failed RESTORE: %w", err)
	}
	return nil
}
