#!/usr/bin/env bash
# Mutation testing of the host logic against the tests that run without a GPU (CI's): each
# mutant (an operator flipped, a match arm deleted, a function body replaced; cargo-mutants)
# must fail a unit test. The kernels' own mutation run, with the GPU oracles, is
# tools/mutation_run.sh.
#
#   bash tools/host_mutants.sh [OUT]       # here, no GPU: three stages, each a list of MISSED
#                                          # mutants in its log and OUT/<stage>/mutants.out/
#                                          # (default OUT: target/host-mutants)
#
# The files: validation, shapes, dispatch, stream-K, the workspace layout, the plan, the skinny
# split, the weight forms and matrix views; then the kernel table, the loaded kernels' refusals
# and waves, the launch's parameters and repacks, the raw entry, errors, the device query and
# the held workspace; then, with feature nccl (which compiles them), the sharded layer's
# column split and its constructors. What needs device memory (the accessors of
# MatrixRef and PreparedWeight, the sharded layer's streams and NCCL) only the GPU suite
# reaches: those mutants survive here by construction. It mutates the working tree in place
# (restored after each mutant), so run it in a worktree of its own; about 40 + 20 + 15 minutes
# on 2 cores. docs/BENCHMARKS.md
# ("Host logic under mutation") has the last run and the survivors judged equivalent.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || { echo "needs cargo-mutants: cargo install --locked cargo-mutants" >&2; exit 2; }
OUT=$(realpath -m "${1:-target/host-mutants}")
mkdir -p "$OUT"
# A worktree has no .toolchain/: build.rs takes nvcc from $NVCC first (the kernels are built
# once, for the unmutated baseline; mutants touch src/ only).
if [ -z "${NVCC:-}" ] && [ -x .toolchain/py/nvidia/cu13/bin/nvcc ]; then export NVCC="$PWD/.toolchain/py/nvidia/cu13/bin/nvcc"; fi

# stage NAME [CARGO-MUTANTS ARG ...] -- FILE ...: the mutants of FILEs, into $OUT/NAME.
stage() {
    local name=$1 extra=() files=()
    shift
    while [ "$1" != -- ]; do extra+=("$1"); shift; done
    shift
    for f in "$@"; do files+=(-f "$f"); done
    echo "== $name: $*"
    cargo mutants --in-place "${files[@]}" "${extra[@]}" --cargo-test-arg=--lib --timeout 90 -o "$OUT/$name" || true
}
stage host --cargo-test-arg=--test=errors -- \
    src/gemm/validate.rs src/gemm/shape.rs src/gemm/workspace.rs src/gemm/stream_k.rs src/gemm/dispatch.rs \
    src/gemm/plan.rs src/gemm/skinny.rs src/gemm/weight.rs src/matrix.rs
stage tables --cargo-test-arg=--test=errors --cargo-test-arg=--test=bindings -- \
    src/kernels/catalogue.rs src/kernels/loaded.rs src/gemm/launch.rs src/gemm/raw.rs src/error.rs src/device.rs src/held.rs
stage nccl --features nccl -- src/sharded/columns.rs src/sharded/mod.rs
for stage in host tables nccl; do
    echo "== $stage: $(wc -l <"$OUT/$stage/mutants.out/missed.txt") missed, $(wc -l <"$OUT/$stage/mutants.out/caught.txt") caught, $(wc -l <"$OUT/$stage/mutants.out/unviable.txt") unviable"
    cat "$OUT/$stage/mutants.out/missed.txt"
done
