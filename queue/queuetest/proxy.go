package queuetest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a Redis and misbehaves on demand as a
// network does: Freeze holds every byte in both directions (Redis stalled:
// SIGSTOP, a long fork, a partition), DropNextReply loses the next reply
// Redis sends and closes that connection (the command ran; go-redis sends
// it again on a new connection), Cut closes every connection and refuses
// new ones (a link down: what was not yet through never arrives).
type Proxy struct {
	Addr string
	drop atomic.Bool
	cut  atomic.Bool

	connsMu sync.Mutex
	conns   []net.Conn

	mu     sync.Mutex
	thawed *sync.Cond // broadcast when frozen turns false or the proxy closes
	frozen bool
	closed bool
}

// StartProxy listens on a free loopback port and forwards to target until
// the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String()}
	p.thawed = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.thawed.Broadcast()
		ln.Close()
		p.closeAll()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			if p.cut.Load() {
				client.Close()
				continue
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			p.connsMu.Lock()
			p.conns = append(p.conns, client, server)
			p.connsMu.Unlock()
			wg.Go(func() { p.pipe(server, client, false) })
			wg.Go(func() { p.pipe(client, server, true) })
		}
	})
	return p
}

// Freeze holds (true) or lets through (false) every byte from now on.
func (p *Proxy) Freeze(on bool) {
	p.mu.Lock()
	p.frozen = on
	p.mu.Unlock()
	p.thawed.Broadcast()
}

// Cut closes every connection and refuses new ones (true), or lets new
// ones through again (false).
func (p *Proxy) Cut(on bool) {
	p.cut.Store(on)
	if on {
		p.closeAll()
	}
}

func (p *Proxy) closeAll() {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// waitThawed holds the caller while the proxy is frozen and open.
func (p *Proxy) waitThawed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && !p.closed {
		p.thawed.Wait()
	}
}

// DropNextReply loses the next bytes Redis sends on any connection, and
// closes that connection.
func (p *Proxy) DropNextReply() { p.drop.Store(true) }

func (p *Proxy) pipe(dst, src net.Conn, replies bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitThawed()
		}
		if n > 0 && replies && p.drop.CompareAndSwap(true, false) {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
