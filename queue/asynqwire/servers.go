package asynqwire

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// asynqmon's Servers tab lists the processes that write their state
// where asynq's servers' heartbeaters write it (internal/base/base.go,
// rdb.WriteServerState): a ServerInfo under a key of the process's own,
// its active tasks as WorkerInfos in a hash beside it, both with a TTL of
// two heartbeats, and each key in a sorted set scored by when it expires.
// asynq writes the two keys with a script; WriteServer uses plain
// commands, each on one key, so no script and no slot is shared.

// AllServers and AllWorkers are the sorted sets of the server and worker
// keys, scored by when they expire (unix s).
const (
	AllServers = "asynq:servers"
	AllWorkers = "asynq:workers"
)

// Server describes one process that takes tasks, as asynqmon shows it.
type Server struct {
	Host string
	PID  int
	// ID tells apart the servers of one process.
	ID string
	// Concurrency is how many tasks it runs at once.
	Concurrency int
	// Queues are the queues it takes from, with their priorities.
	Queues map[string]int
	// Started is when it started.
	Started time.Time
}

// Worker is a task a server holds, as asynqmon shows it.
type Worker struct {
	Task *Task
	// Started is when it was taken (or first seen).
	Started time.Time
}

// ServerKey and WorkersKey are the server's keys: hash-tagged by the
// server, so that each is in a slot of its own on Redis Cluster.
func (s *Server) ServerKey() string {
	return "asynq:servers:{" + s.tag() + "}"
}

// WorkersKey is the hash of the server's active tasks.
func (s *Server) WorkersKey() string {
	return "asynq:workers:{" + s.tag() + "}"
}

func (s *Server) tag() string { return s.Host + ":" + strconv.Itoa(s.PID) + ":" + s.ID }

// WriteServer writes the server's state and its workers, to expire after
// ttl unless written again: one pipeline of plain commands.
func WriteServer(ctx context.Context, rdb redis.UniversalClient, s *Server, workers []Worker, ttl time.Duration) error {
	exp := float64(time.Now().Add(ttl).Unix()) // asynqmon reads them by its host clock
	skey, wkey := s.ServerKey(), s.WorkersKey()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, AllServers, redis.Z{Score: exp, Member: skey})
		p.ZAdd(ctx, AllWorkers, redis.Z{Score: exp, Member: wkey})
		p.Set(ctx, skey, s.encode(len(workers)), ttl)
		p.Del(ctx, wkey)
		if len(workers) > 0 {
			fields := make([]any, 0, 2*len(workers))
			for _, w := range workers {
				fields = append(fields, w.Task.ID, s.encodeWorker(w))
			}
			p.HSet(ctx, wkey, fields...)
			p.Expire(ctx, wkey, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write server state of %s: %w", s.tag(), err)
	}
	return nil
}

// ClearServer removes the server's state, as asynq's server does when it
// shuts down.
func ClearServer(ctx context.Context, rdb redis.UniversalClient, s *Server) error {
	skey, wkey := s.ServerKey(), s.WorkersKey()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, AllServers, skey)
		p.ZRem(ctx, AllWorkers, wkey)
		p.Del(ctx, skey)
		p.Del(ctx, wkey)
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear server state of %s: %w", s.tag(), err)
	}
	return nil
}

// encode marshals the server as asynq's ServerInfo
// (internal/proto/asynq.proto), with active tasks running, status
// "active" and no strict priority.
func (s *Server) encode(active int) []byte {
	var b []byte
	b = appendString(b, 1, s.Host)
	b = appendVarint(b, 2, int64(s.PID))
	b = appendString(b, 3, s.ID)
	b = appendVarint(b, 4, int64(s.Concurrency))
	for name, prio := range s.Queues {
		var e []byte
		e = appendString(e, 1, name)
		e = appendVarint(e, 2, int64(prio))
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	b = appendString(b, 7, "active")
	b = appendTimestamp(b, 8, s.Started)
	b = appendVarint(b, 9, int64(active))
	return b
}

// encodeWorker marshals w as asynq's WorkerInfo.
func (s *Server) encodeWorker(w Worker) []byte {
	var b []byte
	b = appendString(b, 1, s.Host)
	b = appendVarint(b, 2, int64(s.PID))
	b = appendString(b, 3, s.ID)
	b = appendString(b, 4, w.Task.ID)
	b = appendString(b, 5, w.Task.Type)
	if len(w.Task.Payload) > 0 {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendBytes(b, w.Task.Payload)
	}
	b = appendString(b, 7, w.Task.Queue())
	b = appendTimestamp(b, 8, w.Started)
	b = appendTimestamp(b, 9, w.Task.Deadline)
	return b
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendVarint(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// appendTimestamp appends t as a google.protobuf.Timestamp.
func appendTimestamp(b []byte, num protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	var ts []byte
	ts = appendVarint(ts, 1, t.Unix())
	ts = appendVarint(ts, 2, int64(t.Nanosecond()))
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, ts)
}
