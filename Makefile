# Two everyday commands: `make run` and `make test`. Everything else is CMake, except the flake
# hunt, `make test-repeat N=20 [LOAD=1] [SANITIZE=1] [R=regex]` (scripts/test-repeat.sh), and
# `make test-costs` (tests/test_costs.txt from the last run's timings).
BUILD ?= build
JOBS ?= $(shell nproc)
# Tests at a time: one more than the cores. Most integration tests wait on sockets, timers and
# their own clients; at -j2 a 2-core machine sat 40% idle through the suite (the normal suite
# took 450 s at -j2, 371 s at -j3). Tests that measure under load are RUN_SERIAL
# (tests/integration/CMakeLists.txt), so they still run alone.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))
CMAKE_FLAGS ?=
# A new build tree is configured for Ninja when it is installed (scripts/setup-deps.sh installs
# ninja-build): Ninja compiles a target's sources while the libraries it links are still being
# built, where Make waits for each library first, so both cores stay busy. A tree keeps the
# generator it was configured with.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))

.PHONY: all deps build run test test-costs sanitize test-repeat clean

all: build

deps:
	@scripts/setup-deps.sh test

build: deps
	@cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) $(CTEST_FLAGS)

# tests/test_costs.txt (each test's COST: the long ones start first) from the last run's timings.
test-costs:
	@scripts/record-test-costs.py $(BUILD)

sanitize:
	@$(MAKE) test BUILD=build-asan CMAKE_FLAGS='-DRONDEL_SANITIZE=ON -DRONDEL_BUILD_MICROBENCH=OFF'

# The whole suite N times (the sanitizer build with SANITIZE=1, under `stress-ng --cpu 2` with
# LOAD=1, only the tests matching R): each failure with its output, then per-test counts.
N ?= 20
test-repeat:
ifeq ($(SANITIZE),1)
	@$(MAKE) build BUILD=build-asan CMAKE_FLAGS='-DRONDEL_SANITIZE=ON -DRONDEL_BUILD_MICROBENCH=OFF'
	@scripts/test-repeat.sh -n $(N) -b build-asan $(if $(filter 1,$(LOAD)),--load) $(if $(R),-R '$(R)')
else
	@$(MAKE) build
	@scripts/test-repeat.sh -n $(N) -b $(BUILD) $(if $(filter 1,$(LOAD)),--load) $(if $(R),-R '$(R)')
endif

clean:
	rm -rf $(BUILD) build-asan
