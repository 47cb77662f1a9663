package queue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// ListSchedules returns up to limit schedules of the registrar after
// cursor, in no particular order, and the cursor of the next page ("" at
// the end); agents' alarms are left out, so a page may hold fewer. It
// walks each shard's due set with ZSCAN (see listCursor). As with Redis
// SCAN, a schedule present for the whole walk is returned, once unless
// Redis shrinks a shard's table during the walk (mass deletes: then it
// may come twice); one created or deleted meanwhile may or may not be.
func (s *Store) ListSchedules(ctx context.Context, cursor string, limit int) ([]*model.ScheduleRecord, string, error) {
	c, err := s.parseListCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	ids, err := s.walkDue(ctx, &c, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list schedules: %w", err)
	}
	recs, err := s.loadSchedules(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if c.shard < s.cfg.Shards {
		next = c.String()
	}
	return recs, next, nil
}

// maxCursorIDs bounds the left-over ids a cursor may hold: a batch
// overflows a page by a hash bucket's members, or, when Redis reloaded a
// small shard as a listpack mid-walk, by the whole set (up to
// zset-max-listpack-entries, 128 by default).
const maxCursorIDs = 1024

// listCursor is where a walk of the due sets stands, in one of two modes
// for its shard. A page ends between two ZSCAN batches, the only place a
// ZSCAN cursor holds across Redis growing or shrinking the set's table,
// and the few ids of a batch that did not fit (Redis returns a hash bucket
// whole) ride in the cursor. A shard ZSCAN returned whole in one call (a
// small set) is taken in id order instead, and a page that ends inside it
// goes on after the last id returned: the next page reads the whole shard
// again.
//
// Its text is "<shard>:<pos>:<rest in base64url>":
//
//	pos       mode                  rest
//	<n>       scanning, ZSCAN at n  left-over ids, space-separated
//	e         scanning, ZSCAN ended left-over ids, space-separated
//	w         whole                 the last id returned
type listCursor struct {
	shard int
	whole bool     // the shard is read in one piece, after after
	after string   // whole: the last id returned
	zscan uint64   // scanning: the ZSCAN cursor to go on from
	ended bool     // scanning: the shard's ZSCAN has returned cursor 0
	left  []string // scanning: ids of the last batch still to return, sorted
}

// String encodes the cursor.
func (c listCursor) String() string {
	var pos, rest string
	switch {
	case c.whole:
		pos, rest = "w", c.after
	case c.ended:
		pos, rest = "e", strings.Join(c.left, " ")
	default:
		pos, rest = strconv.FormatUint(c.zscan, 10), strings.Join(c.left, " ")
	}
	return fmt.Sprintf("%d:%s:%s", c.shard, pos, base64.RawURLEncoding.EncodeToString([]byte(rest)))
}

// parseListCursor decodes a cursor String wrote; "" is the start of the
// walk. Left-over ids must be as String writes them: sorted, of the
// cursor's shard, and no more than maxCursorIDs.
func (s *Store) parseListCursor(text string) (listCursor, error) {
	var c listCursor
	if text == "" {
		return c, nil
	}
	bad := func() (listCursor, error) { return listCursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, text) }
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 {
		return bad()
	}
	var err error
	if c.shard, err = strconv.Atoi(parts[0]); err != nil || c.shard < 0 || c.shard >= s.cfg.Shards {
		return bad()
	}
	switch parts[1] {
	case "w":
		c.whole = true
	case "e":
		c.ended = true
	default:
		if c.zscan, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
			return bad()
		}
	}
	rest, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil {
		return bad()
	}
	if c.whole {
		c.after = string(rest)
		return c, nil
	}
	c.left = strings.Fields(string(rest))
	if err := s.checkLeftOver(c.shard, c.left); err != nil {
		return bad()
	}
	return c, nil
}

// checkLeftOver checks a cursor's left-over ids.
func (s *Store) checkLeftOver(shard int, ids []string) error {
	if len(ids) > maxCursorIDs {
		return errors.New("too many ids")
	}
	for i, id := range ids {
		if model.ValidateID("cursor", id) != nil || s.shard(id) != shard || (i > 0 && id <= ids[i-1]) {
			return errors.New("bad id")
		}
	}
	return nil
}

// nextShard moves the cursor to the start of the next shard.
func (c *listCursor) nextShard() { *c = listCursor{shard: c.shard + 1} }

// walkDue returns up to limit schedule ids from where c stands and moves
// c past them. Each ZSCAN asks for as many as the page has room for.
func (s *Store) walkDue(ctx context.Context, c *listCursor, limit int) ([]string, error) {
	var ids []string
	for c.shard < s.cfg.Shards && len(ids) < limit {
		room := limit - len(ids)
		if len(c.left) > 0 {
			take := min(room, len(c.left))
			ids, c.left = append(ids, c.left[:take]...), c.left[take:]
			continue
		}
		if c.ended {
			c.nextShard()
			continue
		}
		var keys []string
		var next uint64
		var err error
		if c.whole {
			keys, err = s.scanAll(ctx, c.shard)
		} else {
			keys, next, err = s.rdb.ZScan(ctx, dueKey(c.shard), c.zscan, "", int64(room)).Result()
		}
		if err != nil {
			return nil, err
		}
		members := sortedMembers(keys, c.after)
		take := min(room, len(members))
		ids = append(ids, members[:take]...)
		if c.whole || (c.zscan == 0 && next == 0) {
			if take < len(members) {
				c.whole, c.after = true, members[take-1]
				break
			}
			c.nextShard()
			continue
		}
		c.left, c.zscan, c.ended = members[take:], next, next == 0
	}
	if len(c.left) == 0 && c.ended {
		c.nextShard()
	}
	return ids, nil
}

// sortedMembers returns the members of a ZSCAN reply (member and score
// alternating) after the id after, sorted, each once: a rehashing table
// can return a member twice.
func sortedMembers(keys []string, after string) []string {
	members := make([]string, 0, len(keys)/2)
	for i := 0; i < len(keys); i += 2 {
		if keys[i] > after {
			members = append(members, keys[i])
		}
	}
	slices.Sort(members)
	return slices.Compact(members)
}

// scanAll returns what ZSCAN returns of a whole shard's due set, member
// and score alternating: a set ZSCAN returned whole before, which is
// small unless it has grown since (then read in batches of 1,000).
func (s *Store) scanAll(ctx context.Context, sh int) ([]string, error) {
	var all []string
	for zc := uint64(0); ; {
		keys, next, err := s.rdb.ZScan(ctx, dueKey(sh), zc, "", 1000).Result()
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
		if zc = next; zc == 0 {
			return all, nil
		}
	}
}

// loadSchedules reads the schedules of ids in one pipeline, leaving out
// those deleted since their ids were read.
func (s *Store) loadSchedules(ctx context.Context, ids []string) ([]*model.ScheduleRecord, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, scheduleKey(s.shard(id), id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]*model.ScheduleRecord, 0, len(ids))
	for i, id := range ids {
		if cmds[i].Val()[sfTarget] == targetWake {
			continue // an agent's alarm: its owner lists it (ListAlarms)
		}
		rec, err := s.recordFromHash(id, cmds[i].Val())
		if errors.Is(err, ErrNotFound) {
			continue // deleted between scan and load
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}
