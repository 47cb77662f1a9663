package queue

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterStateReload is how often a Redis Cluster client reloads the
// cluster's slot map: go-redis otherwise keeps dialling a dead master
// for up to a minute after its replica took over.
const ClusterStateReload = time.Second

// OpenRedis opens the client a Redis URL names, the one constructor of
// every chronos process, so the store, redsync's locks and asynqmon
// share it:
//
//   - redis://[user:password@]host:port[/db], rediss:// for TLS: one Redis;
//   - redis-sentinel://[:password@]host:port[,host:port...]/master[/db]:
//     the master the sentinels name, followed across failovers;
//   - redis-cluster://[[user]:password@]host:port[,host:port...]: a Redis
//     Cluster, seeded with any of its nodes (go-redis routes each command
//     and each script by its first key's slot, and splits pipelines by
//     slot).
func OpenRedis(raw string) (redis.UniversalClient, error) {
	if rest, ok := strings.CutPrefix(raw, "redis-sentinel://"); ok {
		bad := fmt.Errorf("REDIS_URL %q: want redis-sentinel://[:password@]host:port[,host:port]/master-name[/db]", RedactURL(raw))
		password := ""
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			password = strings.TrimPrefix(rest[:at], ":")
			rest = rest[at+1:]
		}
		hosts, path, _ := strings.Cut(rest, "/")
		master, dbText, hasDB := strings.Cut(path, "/")
		db := 0
		if hasDB {
			var err error
			if db, err = strconv.Atoi(dbText); err != nil || db < 0 {
				return nil, bad
			}
		}
		if hosts == "" || master == "" {
			return nil, bad
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: master, SentinelAddrs: strings.Split(hosts, ","), Password: password, DB: db,
		}), nil
	}
	if rest, ok := strings.CutPrefix(raw, "redis-cluster://"); ok {
		bad := fmt.Errorf("REDIS_URL %q: want redis-cluster://[[user]:password@]host:port[,host:port...] (a cluster has no database number)", RedactURL(raw))
		user, password := "", ""
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			user, password, _ = strings.Cut(rest[:at], ":")
			rest = rest[at+1:]
		}
		rest = strings.TrimSuffix(rest, "/")
		if rest == "" || strings.ContainsAny(rest, "/?") {
			return nil, bad
		}
		addrs := strings.Split(rest, ",")
		for _, a := range addrs {
			if _, port, ok := strings.Cut(a, ":"); !ok || port == "" {
				return nil, bad
			}
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Username: user, Password: password, ClusterStateReloadInterval: ClusterStateReload,
		}), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, password and all
		}
		return nil, fmt.Errorf("REDIS_URL %q: %w", RedactURL(raw), err)
	}
	// ContextTimeoutEnabled stays off: redsync bounds a lease acquire by
	// 5% of LEASE_TTL, and a deadline that cut the socket would leave a
	// lease taken in Redis but not by the caller behind a short stall.
	// Callers that must answer in time (probes, scrapes) bound their wait
	// themselves (Store.Ping).
	return redis.NewClient(opt), nil
}

// RedactURL hides the password of a Redis URL for logs and errors. It
// works on the text, not url.Parse, so a URL that doesn't parse (a
// sentinel or cluster list, a typo) doesn't leak its password either.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
