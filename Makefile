# Thin wrapper over CMake: the two commands the README promises, and a few more.
#   make         build build/rdma-dp (static)
#   make check   install what is missing, build with -Werror, run every test, again under ASan+UBSan
#   make check-kernel  the real-kernel stage: Debian's kernel under QEMU, tests/kernel against rxe
#   make e2e     the real-cluster stage: Kubernetes built from Go modules, tests/e2e against it
#                (K8S_VERSION=1.34.4 for the oldest supported release)
#   make demo    show what rdma-dp sees and serves on a bundled DGX H100-like node
#   make image   the container image (Containerfile, FROM scratch) as build/rdma-dp-image.tar
#   make image-netop  that image and its network-operator variant (Containerfile.netop, busybox)
#   make fuzz    run each libFuzzer target for FUZZ_SECONDS (default 60; clang, see tests/fuzz)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PY := /usr/bin/python3
# CMake's own progress lines are enough; no "Entering directory" from every sub-make.
MAKEFLAGS += --no-print-directory

.PHONY: all deps build check check-release check-kernel check-e2e e2e check-asan demo image image-netop clean
.PHONY: fuzz check-fuzz fuzz-build fuzz-run clean-fuzz

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build -j$(JOBS)

check: deps check-release check-kernel check-e2e check-fuzz check-asan

check-release:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENABLE_WERROR=ON >/dev/null
	cmake --build build-check -j$(JOBS)
	@rm -f build-check/pytest-junit.xml
	cd build-check && ctest --output-on-failure -j$(JOBS); rc=$$?; cd .. && \
		$(PY) scripts/test-summary.py build-check release; exit $$rc

# The real-kernel stage (scripts/real-kernel/run.sh, tests/kernel/README.md): Debian's 6.1
# kernel under QEMU (TCG unless the CPU has vmx/svm) with soft-RoCE devices, tests/kernel run
# inside it against the real /sys and /dev with build-check's rdma-dp. Its kernel and
# initramfs are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/kernel. Fails, saying why,
# when QEMU cannot start; a guest that does not power off within RDP_KERNEL_LIMIT (900 s) fails.
check-kernel:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENABLE_WERROR=ON >/dev/null
	cmake --build build-check -j$(JOBS) --target rdma-dp
	sh scripts/real-kernel/run.sh build-check build-check/kernel; rc=$$?; \
		$(PY) scripts/test-summary.py build-check/kernel kernel; exit $$rc

# The real-cluster stage (scripts/real-cluster/run.sh, tests/e2e/README.md): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl, containerd and crictl built from
# Go modules (cached under ${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/k8s), a single-node cluster
# on 127.0.0.1, and tests/e2e against it with build-check's rdma-dp in its image.
K8S_VERSION ?= 1.37.2
check-e2e e2e:
	cmake -S . -B build-check -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENABLE_WERROR=ON >/dev/null
	cmake --build build-check -j$(JOBS) --target rdma-dp fixtures
	sh scripts/real-cluster/run.sh build-check build-check/e2e $(K8S_VERSION); rc=$$?; \
		$(PY) scripts/test-summary.py build-check/e2e e2e; exit $$rc

check-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DENABLE_WERROR=ON -DENABLE_SANITIZERS=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	@rm -f build-asan/pytest-junit.xml
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j$(JOBS); \
		rc=$$?; cd .. && $(PY) scripts/test-summary.py build-asan asan; exit $$rc

demo: build
	@sh scripts/demo.sh build

# OCI archive built with buildah (vfs storage, no daemon); prints the sizes it measured.
image: build
	sh scripts/build-image.sh build/rdma-dp build/rdma-dp-image.tar

# The same, and the variant for NVIDIA network-operator (README: Image) as
# build/rdma-dp-netop-image.tar.
image-netop: build
	sh scripts/build-image.sh build/rdma-dp build/rdma-dp-image.tar build/rdma-dp-netop-image.tar

clean:
	rm -rf build build-check build-asan

# Fuzzing (tests/fuzz/README.md): libFuzzer targets built by clang in build-fuzz. New inputs
# go to build-fuzz/corpus/<target>, crashes to build-fuzz/artifacts/; the checked-in seeds
# in tests/fuzz/corpus/<target> are only read.
FUZZ_TARGETS := cli-opt cdi-names config dra-claim dra-slices goflag oci-hook grpc-frame h2-server http-request kube-response nccl-env netlink protobuf sysfs-parsers
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 15
# True when clang can build and link a libFuzzer target here.
FUZZ_PROBE = mkdir -p build-fuzz && command -v clang >/dev/null 2>&1 && \
	printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' | \
	clang -fsanitize=fuzzer,address,undefined -x c - -o build-fuzz/probe >/dev/null 2>&1

fuzz: deps
	@$(FUZZ_PROBE) || { echo "fuzz: clang with libFuzzer not found (install clang and libclang-rt-14-dev: scripts/install-deps.sh)"; exit 1; }
	@$(MAKE) --no-print-directory fuzz-run

# The bounded stage of make check: every target for FUZZ_CHECK_SECONDS over its seeds plus
# what it finds; skipped, saying so, where clang cannot build fuzzers.
check-fuzz:
	@if $(FUZZ_PROBE); then \
		$(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=$(FUZZ_CHECK_SECONDS); \
	else \
		echo "check-fuzz: SKIPPED: clang with libFuzzer not found (scripts/install-deps.sh installs clang and libclang-rt-14-dev)"; \
	fi

fuzz-build:
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DENABLE_WERROR=ON -DENABLE_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j$(JOBS) --target fuzzers

fuzz-run: fuzz-build
	@mkdir -p build-fuzz/artifacts
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p build-fuzz/corpus/$$t; \
		echo "fuzz-$$t: $(FUZZ_SECONDS) s"; \
		if ! build-fuzz/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
			-artifact_prefix=build-fuzz/artifacts/$$t- build-fuzz/corpus/$$t \
			tests/fuzz/corpus/$$t >build-fuzz/fuzz-$$t.log 2>&1; then \
			tail -n 60 build-fuzz/fuzz-$$t.log; \
			echo "fuzz-$$t: FAILED, input saved in build-fuzz/artifacts/ (log: build-fuzz/fuzz-$$t.log)"; \
			exit 1; \
		fi; \
		grep -E '^#[0-9]+[[:space:]]+DONE' build-fuzz/fuzz-$$t.log | tail -n 1; \
	done

clean: clean-fuzz

clean-fuzz:
	rm -rf build-fuzz

# Benchmark (bench/README.md): rdma-dp beside the smallest grpc-go device plugin, driven by a
# grpc-go kubelet, and rdma-dp's own figures (rescan-time, Allocate/GetInfo during rescans,
# memory under hostile peers); prints the table (build/bench/table.md). About 2.5 minutes once
# the fixtures (90 s the first time) and the Go programs exist. BENCH_FLAGS=--quick: a smoke run.
# Its Go toolchain comes from `install-deps.sh bench`, never from make check.
.PHONY: bench
bench: build
	@sh scripts/install-deps.sh bench
	$(PY) bench/bench.py --build build $(BENCH_FLAGS)
