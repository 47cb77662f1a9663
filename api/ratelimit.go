package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

const (
	// rateLimiterIdle is how long a client's limiter is kept unused: past
	// it, its bucket would be full again anyway at any sane rate.
	rateLimiterIdle = 10 * time.Minute
	// rateLimiterMaxClients bounds the clients tracked; past it, new
	// clients share one limiter, so a flood of addresses cannot grow
	// memory without bound.
	rateLimiterMaxClients = 100_000
)

// rateLimiter keeps a token bucket per client key.
type rateLimiter struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	clients   map[string]*clientLimiter
	lastSweep time.Time
}

type clientLimiter struct {
	lim  *rate.Limiter
	seen time.Time
}

func newRateLimiter(limit rate.Limit, burst int) *rateLimiter {
	return &rateLimiter{limit: limit, burst: burst, clients: make(map[string]*clientLimiter)}
}

// reserve takes a token for key at now, or says how long until one is
// free.
func (l *rateLimiter) reserve(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	if l.limit == rate.Inf {
		return true, 0
	}
	l.mu.Lock()
	if now.Sub(l.lastSweep) > time.Minute {
		for k, cl := range l.clients {
			if now.Sub(cl.seen) > rateLimiterIdle {
				delete(l.clients, k)
			}
		}
		l.lastSweep = now
	}
	cl, found := l.clients[key]
	if !found {
		if len(l.clients) >= rateLimiterMaxClients {
			key = "overflow"
			cl = l.clients[key]
		}
		if cl == nil {
			cl = &clientLimiter{lim: rate.NewLimiter(l.limit, l.burst)}
			l.clients[key] = cl
		}
	}
	cl.seen = now
	l.mu.Unlock()

	r := cl.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // refused requests do not spend tokens
		return false, d
	}
	return true, 0
}

// limit answers 429 with Retry-After once the client at key is over its
// rate.
//
// The client's key is kind (its prefix) and name joined, only when
// there is a limit: without one, joining them was an allocation a
// request.
func (s *server) limit(c echo.Context, kind, name string) error {
	if s.limiter.limit == rate.Inf {
		return nil
	}
	ok, wait := s.limiter.reserve(kind+name, time.Now())
	if ok {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	c.Response().Header().Set(echo.HeaderRetryAfter, strconv.Itoa(max(secs, 1)))
	return &statusError{status: http.StatusTooManyRequests, code: CodeRateLimited,
		message: "too many requests from this client; retry after " + strconv.Itoa(max(secs, 1)) + "s"}
}
