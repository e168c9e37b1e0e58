#!/usr/bin/env bash
# Two builds of the crate on the same sweep points, in one device call: the way to measure a
# kernel change against its parent when the card's clock drifts between calls (docs/BENCHMARKS.md,
# "Short K at large M", measured the double-buffered epilogue so).
#
#   bash tools/ab_sweep.sh BASE NEW        # here (no GPU needed): build the sweep bench at two
#                                          # revisions and pack both, with a runner, into .gpu-ab/
#                                          # (git-ignored). A revision is a commit (built in a
#                                          # temporary worktree) or "." (this working tree, as it is).
#   bash .gpu-ab/run [MxNxK ...]           # on the GPU machine (device `run`, carry [".gpu-ab"]):
#                                          # a soak, then for each repeat and point BASE's sweep
#                                          # then NEW's, each its own process timing ours against
#                                          # cuBLAS interleaved; then tools/ab_summary.py's table
#                                          # (also in $OUT/ab.md, the reports in $OUT/ab-reports.tar.xz).
#
# The points must be sweep points (benches/sweep/points.rs); the default is the short-K set of
# that section. AB_REPEATS (default 2) and AB_SOAK_S (default 15) tune the runner; the sweep's
# own variables (GEMM_EPILOGUE_SWEEP_ROUNDS, ...) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n '2,17p' "$0"; exit 2; }
OUT=.gpu-ab
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/ab}"
export CARGO_PROFILE_RELEASE_STRIP=symbols
# A worktree has no .toolchain/: build.rs takes nvcc from $NVCC first.
if [ -z "${NVCC:-}" ] && [ -x .toolchain/py/nvidia/cu13/bin/nvcc ]; then export NVCC="$PWD/.toolchain/py/nvidia/cu13/bin/nvcc"; fi
CARGO_TARGET_DIR=$(realpath -m "$CARGO_TARGET_DIR")

STAGE="$CARGO_TARGET_DIR/ab-stage"
rm -rf "$STAGE" && mkdir -p "$STAGE"
worktrees=()
cleanup() {
    local w
    for w in "${worktrees[@]}"; do git worktree remove --force "$w" 2>/dev/null || true; done
}
trap cleanup EXIT

# build NAME REV: the sweep bench's executable at REV, staged as $STAGE/NAME; its description in $STAGE/NAME.rev.
build() {
    local name=$1 rev=$2 dir json exe
    if [ "$rev" = . ]; then
        dir=$PWD
        echo "$(git rev-parse --short HEAD) + working tree ($(git status --porcelain | wc -l) changed paths)" >"$STAGE/$name.rev"
    else
        dir=$(mktemp -d)
        git worktree add --detach -q "$dir" "$rev"
        worktrees+=("$dir")
        git -C "$dir" rev-parse --short HEAD >"$STAGE/$name.rev"
    fi
    echo "== $name: building the sweep bench at $(cat "$STAGE/$name.rev")" >&2
    json=$(cd "$dir" && nice -n 15 cargo bench --no-run --bench sweep --message-format=json)
    exe=$(jq -r 'select(.reason == "compiler-artifact" and .executable != null and .target.kind == ["bench"]) | .executable' <<<"$json" | tail -1)
    [ -n "$exe" ] || { echo "$name: no sweep executable" >&2; exit 1; }
    cp "$exe" "$STAGE/$name"
}
# Both revisions resolved now, so that commits made while the first one builds cannot move the second.
revs=()
for rev in "$1" "$2"; do
    if [ "$rev" = . ]; then revs+=(.); else revs+=("$(git rev-parse --verify "$rev^{commit}")"); fi
done
build base "${revs[0]}"
build new "${revs[1]}"

rm -rf "$OUT" && mkdir -p "$OUT"
# The two executables share most of their bytes: one solid xz stream stores them once.
(cd "$STAGE" && tar -cf - base new base.rev new.rev | xz -T0 -6 --lzma2=preset=6,dict=64MiB) >"$OUT/builds.tar.xz"

cat >"$OUT/run" <<'RUNNER'
#!/usr/bin/env bash
# Runs the packed builds' sweeps, alternating per point (see tools/ab_sweep.sh).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here}
points=("$@")
[ ${#points[@]} -gt 0 ] || points=(8192x3072x768 4096x3072x768 8192x768x3072 16384x1024x1024 8192x4096x4096 16384x4096x4096 1024x4096x11008 512x768x3072 64x3072x768)
export GEMM_EPILOGUE_REQUIRE_GPU=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$here/builds.tar.xz" -C "$tmp" && chmod u+x "$tmp/base" "$tmp/new"
echo "base: $(cat "$tmp/base.rev"); new: $(cat "$tmp/new.rev")"
mkdir -p "$tmp/reports"
GEMM_EPILOGUE_SOAK_S="${AB_SOAK_S:-15}" GEMM_EPILOGUE_BENCH_OUT="$tmp/soak.md" "$tmp/base" --bench sweep/8192x4096x4096 >/dev/null 2>&1
for rep in $(seq 1 "${AB_REPEATS:-2}"); do
    for p in "${points[@]}"; do
        for b in base new; do
            GEMM_EPILOGUE_SOAK_S=0 GEMM_EPILOGUE_BENCH_OUT="$tmp/reports/r$rep-$b-$p.md" "$tmp/$b" --bench "sweep/$p" >"$tmp/reports/r$rep-$b-$p.log" 2>&1 ||
                { echo "$b $p (repeat $rep) failed:"; tail -5 "$tmp/reports/r$rep-$b-$p.log"; continue; }
            [ -s "$tmp/reports/r$rep-$b-$p.md" ] || echo "$b $p (repeat $rep): no report ($(tail -1 "$tmp/reports/r$rep-$b-$p.log")): not a sweep point?"
        done
    done
done
# The summary from the working tree, which travels with .gpu-ab/ (it reads docs/plot_benchmarks.py).
{ echo "base: $(cat "$tmp/base.rev"); new: $(cat "$tmp/new.rev"); $(date -u '+%Y-%m-%d %H:%M UTC')"; echo
  python3 "$here/../tools/ab_summary.py" "$tmp/reports" base new; } | tee "$out/ab.md"
tar -cJf "$out/ab-reports.tar.xz" -C "$tmp" reports
RUNNER
chmod +x "$OUT/run"
du -sh "$OUT" >&2
echo "ab_sweep: done. On the GPU machine, from the repo root: bash $OUT/run [MxNxK ...]" >&2
