# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go

.PHONY: run test build image bench fuzz redis-cluster redis-cluster-down redis-sentinel redis-sentinel-down test-topologies test-failover test-failover-cut

## run: chronos dev — API, scheduler, launcher and asynqmon on an embedded Redis.
## The shell execs the built binary instead of `go run`, whose child would
## outlive a SIGTERM sent to it: so the process make starts is the server.
run: build
	exec ./bin/chronos dev

## build: the one binary, into bin/chronos.
build:
	$(GO) build -o bin/chronos ./cmd/chronos

## image: the container image (deploy/Dockerfile) as chronos:local, the
## name docker-compose.yml uses.
image:
	docker build -f deploy/Dockerfile -t chronos:local .

## test: every test, including integration tests on a real redis-server
## (started by the tests on free ports) and the multi-process chaos tests;
## CI (.ci/run) runs it. Every package runs on one redis-server; the
## store (queue) suite also runs on a Sentinel set and on a Redis
## Cluster, the scheduler and launcher suites on a Cluster (TestStoreOn*,
## TestSchedulerOnCluster and TestLauncherOnCluster re-run their package's
## test binary under CHRONOS_TEST_TOPOLOGY; docs/operations.md). The
## engine's full oracle comparison runs without -race (the race run
## samples it), beside the race run rather than after it.
test:
	$(GO) vet ./...
	@echo "$(GO) test -race -count=1 -timeout 15m ./...  (beside it: $(GO) test -count=1 -run Oracle ./model/)"; \
	oracle=$${TMPDIR:-/tmp}/chronos-oracle-$$$$.log; \
	$(GO) test -count=1 -run 'Oracle' ./model/ >$$oracle 2>&1 & pid=$$!; \
	$(GO) test -race -count=1 -timeout 15m ./...; race=$$?; \
	wait $$pid; o=$$?; echo "$(GO) test -count=1 -run Oracle ./model/:"; cat $$oracle; rm -f $$oracle; \
	[ $$race = 0 ] && [ $$o = 0 ]

## redis-cluster: a local Redis Cluster (3 masters, 3 replicas) on free
## loopback ports; prints the REDIS_URL line to eval. redis-cluster-down
## stops it. redis-sentinel(-down): a primary, a replica and 3 sentinels.
redis-cluster:
	@scripts/redis-cluster.sh up
redis-cluster-down:
	@scripts/redis-cluster.sh down
redis-sentinel:
	@scripts/redis-sentinel.sh up
redis-sentinel-down:
	@scripts/redis-sentinel.sh down

## test-topologies: the store, scheduler and launcher integration suites
## on a Sentinel set, then on a Redis Cluster (CHRONOS_TEST_TOPOLOGY,
## queue/queuetest/topology.go), without -race; each test binary lends
## its tests sets it starts once and empties between them (shared.go).
TOPOLOGY_PKGS ?= ./queue/... ./scheduler/... ./launcher/...
test-topologies:
	CHRONOS_TEST_TOPOLOGY=sentinel $(GO) test -count=1 -timeout 30m $(TOPOLOGY_PKGS)
	CHRONOS_TEST_TOPOLOGY=cluster $(GO) test -count=1 -timeout 30m $(TOPOLOGY_PKGS)

## test-failover: the failover chaos test (cmd/chronos/failover_chaos_test.go)
## on Sentinel, then on Cluster: a master killed under load, its replica
## promoted, 0 planned runs lost; prints the FAILOVER lines of what it cost
## (the whole log in $TMPDIR/chronos-failover-<topology>.log).
test-failover:
	@for topo in sentinel cluster; do \
	  log=$${TMPDIR:-/tmp}/chronos-failover-$$topo.log; \
	  CHRONOS_TEST_TOPOLOGY=$$topo $(GO) test -count=1 -timeout 20m -run '^TestChaosFailover$$' -v ./cmd/chronos/ >$$log 2>&1; s=$$?; \
	  grep -E 'FAILOVER|^(--- |ok|FAIL)' $$log; [ $$s = 0 ] || exit $$s; \
	done

## test-failover-cut: the failover test on Sentinel with the replica's
## link cut 2 s before the primary dies (the replica replicates through a
## proxy), without and with REDIS_WAIT_REPLICAS=1: what an asynchronous
## failover loses, and what waiting for the replica saves.
test-failover-cut:
	@for wait in 0 1; do \
	  log=$${TMPDIR:-/tmp}/chronos-failover-cut-wait$$wait.log; \
	  CHRONOS_TEST_TOPOLOGY=sentinel CHRONOS_FAILOVER_CUT_MS=2000 CHRONOS_FAILOVER_WAIT_REPLICAS=$$wait \
	    $(GO) test -count=1 -timeout 20m -run '^TestChaosFailover$$' -v ./cmd/chronos/ >$$log 2>&1; s=$$?; \
	  echo "REDIS_WAIT_REPLICAS=$$wait:"; grep -E 'FAILOVER|^(--- |ok|FAIL)' $$log; [ $$s = 0 ] || exit $$s; \
	done

## bench: micro-benchmarks of the engine, then the load harness (scripts/bench;
## BENCH_FLAGS=-quick for a short run, -million for 1M schedules).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./model/
	$(GO) run ./scripts/bench $(BENCH_FLAGS)

## fuzz: each parser's fuzzer for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseStandard$$' -fuzztime $(FUZZTIME) ./model/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePosix$$' -fuzztime $(FUZZTIME) ./model/
	$(GO) test -run '^$$' -fuzz '^FuzzResolveOnce$$' -fuzztime $(FUZZTIME) ./model/
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME) ./model/
	$(GO) test -run '^$$' -fuzz '^FuzzPreview$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzUpsert$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzUpsertBody$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzPause$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzRunStatus$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzManualStart$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzListSchedules$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAsynqMessage$$' -fuzztime $(FUZZTIME) ./queue/asynqwire/
