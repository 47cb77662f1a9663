package queuetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process of a Cluster or a Sentinel set (a
// Redis or a sentinel). Its port and files stay across Kill and Restart,
// so a restarted cluster node keeps its identity (nodes.conf) and a
// restarted sentinel its configuration.
type Node struct {
	Addr string
	Port int

	bin  string
	args []string // after the port arguments
	dir  string   // the node's own directory: config, nodes.conf, log

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been reaped
	logf   *os.File
	paused bool

	// lent marks a node of a set StartRedis lends to one test after
	// another (shared.go). It lives as long as the test binary, so no
	// goroutine waits for it (goleak would report that goroutine at the
	// end of every package): Kill reaps it itself, and the kernel kills it
	// when the test binary exits (Pdeathsig). disturbed records that a
	// test killed, restarted or paused it, so the set is not lent again.
	lent      bool
	disturbed bool
	killMu    sync.Mutex // serializes Kill's reaping of a lent node
}

// redisServer returns the path of redis-server, failing the test when it
// is missing: integration tests never skip.
func redisServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (install it, e.g. apt-get install -y redis-server): %v", err)
	}
	return bin
}

// startNode starts a redis-server on a free port given by port (called
// again if the port was taken before the server bound it), with args
// made by argsFor(port, dir), and waits until it answers PING. The node is
// killed in t.Cleanup.
func startNode(t testing.TB, parent, name string, port func() int, argsFor func(port int, dir string) []string) *Node {
	t.Helper()
	return startNodeOf(t, nil, parent, name, port, argsFor)
}

// nodeSet collects the lent nodes of one set as they start, so that the
// set's owner (shared.go) kills them all, even those of a set that never
// came up.
type nodeSet struct {
	mu    sync.Mutex
	nodes []*Node
}

func (s *nodeSet) add(n *Node) {
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
}

// kill kills every node of the set.
func (s *nodeSet) kill() {
	s.mu.Lock()
	nodes := s.nodes
	s.mu.Unlock()
	for _, n := range nodes {
		n.Kill()
	}
}

// disturbed reports whether a test killed, restarted or paused a node.
func (s *nodeSet) disturbed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		n.mu.Lock()
		d := n.disturbed
		n.mu.Unlock()
		if d {
			return true
		}
	}
	return false
}

// startNodeOf is startNode; with lent set, the node is a lent one (see
// Node.lent), added to lent and not killed in t.Cleanup: the set's owner
// (shared.go) kills it.
func startNodeOf(t testing.TB, lent *nodeSet, parent, name string, port func() int, argsFor func(port int, dir string) []string) *Node {
	t.Helper()
	bin := redisServer(t)
	for attempt := 0; attempt < 5; attempt++ {
		p := port()
		dir := filepath.Join(parent, fmt.Sprintf("%s-%d", name, p))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		n := &Node{Addr: fmt.Sprintf("127.0.0.1:%d", p), Port: p, bin: bin, dir: dir, args: argsFor(p, dir), lent: lent != nil}
		if err := n.start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		if lent != nil {
			lent.add(n)
		}
		err := WaitRedis(context.Background(), n.Addr, 10*time.Second, n.exited)
		if err == nil {
			// Another test's server may have taken the port between the
			// check and the bind: the answer must come from this process.
			err = n.answersItself()
		}
		if err == nil {
			if lent == nil {
				t.Cleanup(n.Kill)
			}
			return n
		}
		n.Kill()
		b, _ := os.ReadFile(n.LogPath())
		t.Logf("%s on port %d did not come up (retrying): %s", name, p, lastLines(string(b), 5))
	}
	t.Fatalf("could not start %s after 5 attempts", name)
	return nil
}

// answersItself reports an error unless the server answering on n.Addr
// is n's own process.
func (n *Node) answersItself() error {
	n.mu.Lock()
	pid := n.cmd.Process.Pid
	n.mu.Unlock()
	return AnswersAs(context.Background(), n.Addr, pid)
}

// AnswersAs reports an error unless the redis-server answering on addr is
// process pid: a port chosen free can be taken by another test's server
// before this one binds it, and the two would then share one Redis.
func AnswersAs(ctx context.Context, addr string, pid int) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("%s answers from another process than %d (the port was taken meanwhile)", addr, pid)
	}
	return nil
}

// LogPath is the node's log file.
func (n *Node) LogPath() string { return filepath.Join(n.dir, "redis.log") }

func (n *Node) start() error {
	logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = ProcAttrDiesWithTest()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	if !n.lent {
		go func() {
			_ = cmd.Wait()
			logf.Close()
			close(done)
		}()
	}
	n.mu.Lock()
	n.cmd, n.done, n.logf, n.paused = cmd, done, logf, false
	n.mu.Unlock()
	return nil
}

// exited reports whether the node's process has ended.
func (n *Node) exited() bool {
	n.mu.Lock()
	done, cmd := n.done, n.cmd
	n.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return n.lent && exitedNoReap(cmd.Process.Pid)
	}
}

// Alive reports whether the node's process is running (paused counts).
func (n *Node) Alive() bool { return !n.exited() }

// Kill ends the node with SIGKILL, as a crash does (a paused node dies
// too), and reaps it. Killing a dead node does nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.disturbed = true
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	if n.lent {
		n.killMu.Lock()
		defer n.killMu.Unlock()
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		n.mu.Lock()
		n.logf.Close()
		n.mu.Unlock()
		close(done)
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Restart starts a killed node again on its port, with its arguments and
// its directory, and waits until it answers PING.
func (n *Node) Restart(t testing.TB) {
	t.Helper()
	if n.Alive() {
		t.Fatalf("restart %s: it is running", n.Addr)
	}
	n.mu.Lock()
	n.disturbed = true
	n.mu.Unlock()
	if err := n.start(); err != nil {
		t.Fatalf("restart %s: %v", n.Addr, err)
	}
	err := WaitRedis(context.Background(), n.Addr, 10*time.Second, n.exited)
	if err == nil {
		// Another test's server may have taken the port while it was down.
		err = n.answersItself()
	}
	if err != nil {
		b, _ := os.ReadFile(n.LogPath())
		t.Fatalf("restart %s: %v\n%s", n.Addr, err, lastLines(string(b), 5))
	}
}

// Pause freezes the node with SIGSTOP (true) or lets it run again with
// SIGCONT (false): a stalled server, which its peers or sentinels may
// take for dead.
func (n *Node) Pause(t testing.TB, on bool) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s %s: %v", sig, n.Addr, err)
	}
	n.paused = on
	n.disturbed = true
}

// clusterPort returns a port p free on 127.0.0.1 whose cluster bus port
// p+10000 is free too. It draws from 15000-24999, below Linux's
// ephemeral range, so that p+10000 is a valid port.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 15000 + rand.IntN(10000)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatal("no free port pair (p, p+10000) for a cluster node")
	return 0
}

// sentinelPort returns a port free on 127.0.0.1 for a node of a Sentinel
// set, drawn from 10000-14999: below the cluster's ports and Linux's
// ephemeral range, where FreePort's come from. A set's sentinels remember
// every node they saw, a primary killed in a failover too, and make any
// server that later answers at its address a replica of the new primary,
// which replaces its data: a plain test's server given that port by
// FreePort lost its keys so.
func sentinelPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		if p := 10000 + rand.IntN(5000); portFree(p) {
			return p
		}
	}
	t.Fatal("no free port for a Sentinel set's node")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// poll calls f every 20 ms until it returns true or timeout passes, then
// fails the test with what's last message.
func poll(t testing.TB, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, msg)
		}
		<-tick.C
	}
}
