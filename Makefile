# Two everyday commands: `make run` and `make test`. Everything else is CMake, except the flake
# hunt: `make test-repeat N=20 [LOAD=1] [SANITIZE=1] [R=regex]` (scripts/test-repeat.sh).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test sanitize test-repeat clean

all: build

deps:
	@scripts/setup-deps.sh test

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/demo.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

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
