# The two quick-start commands are `make demo` and `make test`; both install
# what they need (apt) and build first. Plain `make` builds build/trainstep.
BUILD ?= build
JOBS ?= 2

.PHONY: all deps build demo test test-cpp test-python clean
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

clean:
	rm -rf $(BUILD) out
