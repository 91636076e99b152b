#!/bin/sh
# What the real-kernel stage needs on the host (the guest sees the same installed tools through
# its overlay root): the project's installer's "kernel" set, installed when missing.
set -eu
exec sh "$(dirname "$0")/../install-deps.sh" kernel
