# Thin wrapper over CMake: the two commands the README promises, and a few more.
#   make         build build/rdma-dp (static)
#   make check   install what is missing, build with -Werror, run every test, again under ASan+UBSan
#   make demo    show what rdma-dp sees and serves on a bundled DGX H100-like node
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PY := /usr/bin/python3

.PHONY: all deps build check check-release check-asan demo clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$(JOBS)

check: deps check-release check-asan

check-release:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENABLE_WERROR=ON >/dev/null
	cmake --build build-check -j$(JOBS)
	cd build-check && ctest --output-on-failure -j$(JOBS)

check-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DENABLE_WERROR=ON -DENABLE_SANITIZERS=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j$(JOBS)

demo: build
	@sh scripts/demo.sh build

clean:
	rm -rf build build-check build-asan
