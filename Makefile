# kvgate build, test and benchmark entry points. `make help` lists them.

GO        ?= go
PKGS      ?= ./...
TAGS      ?= invariants
# make test fuzzes each target for a number of executions, not seconds: Go's
# fuzzer can report "context deadline exceeded" when a time limit ends while
# a worker is busy, which a loaded CI machine turns into a flaky failure.
FUZZTIME  ?= 20000x
LONGFUZZ  ?= 60s
BENCHTIME ?= 1s
BINARIES  := kvgate kvgate-sim kvgate-bench kvgate-bridge
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# llama.cpp's llama-server, built for CPU from the source node-llama-cpp
# bundles (perf/scripts/build-llama-server.sh), once per LLAMA_CACHE: the
# real engine of the end-to-end tests (perf/llamacpp, perf/gguf).
LLAMA_VERSION ?= 3.21.1
LLAMA_CACHE   ?= $(HOME)/.cache/kvgate/llama.cpp-$(LLAMA_VERSION)
LLAMA_JOBS    ?= 2
export KVGATE_LLAMA_SERVER ?= $(abspath $(LLAMA_CACHE))/bin/llama-server

.PHONY: help build run test vet race cross unit fuzz-short bench-once e2e bench fuzz lint generate clean llama-server llama-server-background

help:
	@echo "make run      start kvgate on its embedded default (simulated engines)"
	@echo "make test     vet, race tests, short fuzzing, every benchmark once, end-to-end tests"
	@echo "make bench    all benchmarks (BENCHTIME=$(BENCHTIME)); record results in perf/RESULTS.md"
	@echo "make fuzz     every fuzz target for LONGFUZZ=$(LONGFUZZ)"
	@echo "make lint     go vet and staticcheck"
	@echo "make build    binaries into bin/"
	@echo "make llama-server  llama.cpp's server for CPU into LLAMA_CACHE=$(LLAMA_CACHE) (once)"

build:
	@mkdir -p bin
	$(GO) build -o bin/ $(addprefix ./cmd/,$(BINARIES))

run: build
	@echo "kvgate: OpenAI and Anthropic APIs on http://127.0.0.1:8080, 4 simulated engines; metrics on :9090/metrics"
	@echo "try:   curl -s localhost:8080/v1/chat/completions -d '{\"model\":\"Qwen/Qwen3-8B\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16}'"
	@echo "       curl -sN localhost:8080/v1/messages -d '{\"model\":\"Qwen/Qwen3-8B\",\"max_tokens\":16,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'"
	./bin/kvgate --listen 127.0.0.1:8080 --sim-engines 4

# A fresh machine builds llama-server first (6-12 minutes of both cores).
# The build starts at once, niced, in the background, and takes the CPU
# the steps that do not run it leave idle (vet, cross and fuzz-short leave
# about a fifth of two cores, bench-once about half); race and e2e, which run it,
# wait for it (the build script's lock) and then run. Where the binary is
# cached, the background start returns at once.
test:
	@$(MAKE) --no-print-directory llama-server-background
	@$(MAKE) --no-print-directory vet cross fuzz-short bench-once
	@$(MAKE) --no-print-directory llama-server
	@$(MAKE) --no-print-directory race e2e

# Fetches node-llama-cpp@$(LLAMA_VERSION) with npm pack (no install scripts),
# clones the llama.cpp git bundle inside it and builds llama-server alone:
# Release, GGML_NATIVE=OFF, static, no web UI, no tests or examples. Skipped
# when $(LLAMA_CACHE)/bin/llama-server exists.
llama-server:
	@perf/scripts/build-llama-server.sh $(LLAMA_VERSION) $(LLAMA_CACHE) $(LLAMA_JOBS)

# The same build at the lowest priority, in the background, its output in
# $(LLAMA_CACHE)/build.log; `make llama-server` afterwards waits for it
# (and shows the failure by building again, if it failed).
llama-server-background:
	@if [ -x $(LLAMA_CACHE)/bin/llama-server ]; then \
	  echo "llama-server: cached at $(LLAMA_CACHE)/bin/llama-server"; \
	else mkdir -p $(LLAMA_CACHE) && \
	  echo "llama-server: building in the background (nice 19; $(LLAMA_CACHE)/build.log)" && \
	  { nice -n 19 perf/scripts/build-llama-server.sh $(LLAMA_VERSION) $(LLAMA_CACHE) $(LLAMA_JOBS) \
	      >$(LLAMA_CACHE)/build.log 2>&1 </dev/null & }; fi

vet:
	$(GO) vet -tags $(TAGS),e2e $(PKGS)

# perf/cluster's virtual-time runs under -race and the invariant checks take
# minutes on a loaded 2-core machine: 20 minutes a package, not Go's 10.
race:
	$(GO) test -race -tags $(TAGS) -count=1 -timeout 20m $(PKGS)

# kvstore has assembly for amd64 and arm64 and plain Go for the rest: its
# tests run for arm64 and riscv64 too, under qemu (qemu-user-static), or are
# only vetted for them where qemu is missing.
CROSS := arm64:qemu-aarch64-static riscv64:qemu-riscv64-static
cross:
	@set -e; for c in $(CROSS); do arch=$${c%%:*}; qemu=$${c#*:}; \
	  if command -v $$qemu >/dev/null 2>&1; then \
	    echo "kvstore on $$arch ($$qemu)"; GOARCH=$$arch $(GO) test -exec $$qemu -short -count=1 ./kvstore; \
	  else echo "kvstore on $$arch: vet only ($$qemu not installed)"; GOARCH=$$arch $(GO) vet ./kvstore; fi; \
	done

# Runs each fuzz target alone (a fuzzing run takes one target at a time),
# from one instrumented test binary per package (go test -c -fuzz): built
# once, not once a target. It runs in the package's directory, so it finds
# testdata/fuzz, with go test's own fuzz cache.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz-targets FT=$(FUZZTIME)

fuzz:
	@$(MAKE) --no-print-directory fuzz-targets FT=$(LONGFUZZ)

fuzz-targets:
	@set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; cache=$$($(GO) env GOCACHE)/fuzz; \
	for pkg in $$($(GO) list $(PKGS)); do \
	  targets=$$($(GO) test -tags $(TAGS) -list '^Fuzz' $$pkg | grep '^Fuzz' || true); \
	  [ -n "$$targets" ] || continue; \
	  $(GO) test -c -tags $(TAGS) -fuzz . -o "$$bin/fuzz.test" $$pkg; \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$targets; do \
	    echo "fuzz $$pkg $$t ($(FT))"; \
	    run() { (cd "$$dir" && "$$bin/fuzz.test" -test.run '^$$' -test.fuzz "^$$t$$" -test.fuzztime $(FT) \
	      -test.fuzzcachedir "$$cache/$$pkg") > /tmp/kvgate-fuzz.log 2>&1; }; \
	    run || \
	      { if grep -q "context deadline exceeded" /tmp/kvgate-fuzz.log && ! grep -q "Failing input" /tmp/kvgate-fuzz.log; then \
	          echo "  (the fuzzer's own timeout, not a finding: once more)"; \
	          run || { cat /tmp/kvgate-fuzz.log; exit 1; }; \
	        else cat /tmp/kvgate-fuzz.log; exit 1; fi; }; \
	  done; done

# Every benchmark once, so none rots (CI). -short shrinks the largest data
# sets; the invariants tag stays off so benchmarks run the real code.
bench-once:
	$(GO) test -short -run '^$$' -bench . -benchtime 1x $(PKGS)

# End-to-end tests start real processes on loopback; they live in packages
# named e2e and run with the e2e build tag. Those against llama.cpp find it
# through KVGATE_LLAMA_SERVER (exported above).
e2e: llama-server
	@if $(GO) list -tags e2e ./... 2>/dev/null | grep -q /e2e; then \
	  $(GO) test -tags e2e,$(TAGS) -count=1 -timeout 15m $$($(GO) list -tags e2e ./... | grep /e2e); \
	else echo "e2e: no end-to-end packages yet"; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

lint:
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

generate:
	$(GO) generate $(PKGS)

clean:
	rm -rf bin
