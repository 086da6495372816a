# Two everyday commands: `make run` and `make test`. Everything else is CMake.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test sanitize clean

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
	@$(MAKE) test BUILD=build-asan CMAKE_FLAGS=-DRONDEL_SANITIZE=ON

clean:
	rm -rf $(BUILD) build-asan
