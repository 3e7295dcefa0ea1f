# The two quick-start commands are `make demo` and `make test`; both install
# what they need (apt) and build first. Plain `make` builds build/trainstep.
# `make test-asan` runs the C++ suite and the pytest files marked `asan` under
# ASan + UBSan (build-asan/);
# `make fuzz` runs each libFuzzer target for FUZZ_SECONDS (build-fuzz/).
# `make peers` times trainstep against torch eager, torch.compile and JAX
# (bench/peers/run.sh; PEERS_ARGS passes options, e.g. PEERS_ARGS="--models mnist").
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS ?= 2
# The sanitizer and fuzz builds leave the CUDA backend out: its tests need a
# GPU, and nvcc does not build with the sanitizers.
SAN_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINSTEP_SANITIZE=address,undefined \
            -DTRAINSTEP_WITH_CUDA=OFF

.PHONY: all deps build demo test test-asan fuzz peers clean
all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh

test: build
	@scripts/run-tests.sh

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(SAN_FLAGS) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@BUILD=$(ASAN_BUILD) TORCH2=0 MARK=asan scripts/run-tests.sh

fuzz: deps
	@scripts/install-deps.sh fuzz
	@cmake -S . -B $(FUZZ_BUILD) $(SAN_FLAGS) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DTRAINSTEP_FUZZ=ON -DTRAINSTEP_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

peers: build
	@TRAINSTEP_BIN=$${TRAINSTEP_BIN:-$(CURDIR)/$(BUILD)/trainstep} bench/peers/run.sh $(PEERS_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) out
