#!/usr/bin/env bash
# Builds the oracle test executables once per deliberate bug ("mutant") and packs them, with a
# runner, into .gpu-mutants/ (git-ignored), to prove on a GPU that the oracles catch each bug.
#
#   bash tools/mutation_run.sh [N ...]     # here (no GPU needed): build and pack; default: every
#                                          # `#if GE_MUTATION == N` hook in csrc/ and
#                                          # `cfg!(ge_mutation = "N")` hook in src/
#   bash .gpu-mutants/run [N ...]          # on the GPU machine: run each mutant's tests and
#                                          # print which failed; a mutant nobody catches SURVIVED
#
# The hooks (csrc/): 1 CTA 0's last work item skips its last k-block
# (stream_k_schedule.cuh); 2 a stream-K finisher leaves out one partial (stream_k.cuh); 3 tile 1
# is never stored, tile 0 stored twice (tile_raster.cuh); 4 the kernels that round operands in
# registers truncate them (ptx.cuh); 5 exact TF32 ties round toward zero (ptx.cuh); 6 the plans
# that round on load get fp32 tensor maps, so the TMA does not round (src/gemm/launch.rs); 7 a
# skinny cluster's rank 0 leaves out the last rank's sum of K (csrc/skinny/cluster_reduce.cuh).
# Mutant 0 is the unmutated build, the control: every test must pass there.
#
# `GEMM_EPILOGUE_MUTATION=N` makes build.rs pass -DGE_MUTATION=N to nvcc. The builds use their
# own target directory (target/mutants), so the normal build's kernels are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=(gpu_exact gpu_emulated gpu_fuzz gpu_rounding gpu_round_on_load)
OUT=.gpu-mutants
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/mutants}"
# Smaller executables to carry to the GPU machine.
export CARGO_PROFILE_RELEASE_STRIP=symbols

if [ $# -gt 0 ]; then
    mutants=("$@")
else
    mapfile -t found < <({ grep -rhoE 'GE_MUTATION == [0-9]+' csrc | awk '{print $3}'; grep -rhoE 'ge_mutation = "[0-9]+"' src | grep -oE '[0-9]+'; } | sort -un)
    mutants=(0 "${found[@]}")
fi

mkdir -p "$OUT"
test_args=()
for t in "${TESTS[@]}"; do test_args+=(--test "$t"); done

# The executables of one test differ little from mutant to mutant (the kernels' image, a few
# functions), so they are staged side by side and packed as one solid xz archive sorted by test:
# about 5 MiB for 7 mutants × 4 tests, where gzip per file gave 87 MiB (the device tool carries
# 64 MiB).
STAGE="$CARGO_TARGET_DIR/mutant-stage"
rm -rf "$STAGE"
for n in "${mutants[@]}"; do
    echo "== mutant $n: building ${TESTS[*]}" >&2
    if [ "$n" = 0 ]; then unset GEMM_EPILOGUE_MUTATION; else export GEMM_EPILOGUE_MUTATION="$n"; fi
    json=$(nice -n 15 cargo test --release --no-run --message-format=json "${test_args[@]}")
    mkdir -p "$STAGE/$n"
    # One compiler-artifact line per test target, with the path of its executable.
    while IFS=$'\t' read -r name exe; do
        cp "$exe" "$STAGE/$n/$name"
    done < <(jq -r 'select(.reason == "compiler-artifact" and .executable != null and .target.kind == ["test"]) | [.target.name, .executable] | @tsv' <<<"$json")
    for t in "${TESTS[@]}"; do
        [ -f "$STAGE/$n/$t" ] || { echo "mutant $n: no executable for $t" >&2; exit 1; }
    done
done
unset GEMM_EPILOGUE_MUTATION
rm -rf "$OUT"
mkdir -p "$OUT"
(cd "$STAGE" && find . -type f | sort -t/ -k3,3 -k2,2n | tar -cf - -T - | xz -T0 -6 --lzma2=preset=6,dict=256MiB) >"$OUT/mutants.tar.xz"

cat >"$OUT/run" <<'RUNNER'
#!/usr/bin/env bash
# Runs every packed mutant's tests on this (GPU) machine and prints, per mutant, the tests that
# failed. Mutant 0 (the unmutated build) must pass everything; every other mutant must fail at
# least one test. Each executable runs with GEMM_EPILOGUE_REQUIRE_GPU=1 (no silent skips) and a
# time limit (a hang counts as caught, and is reported as such). Optional arguments: mutants.
set -uo pipefail
cd "$(dirname "$0")"
LIMIT="${MUTANT_TIME_LIMIT:-900}"
# The fuzz test's default of 500 cases is enough for a control run; mutants need fewer.
export GEMM_EPILOGUE_FUZZ_CASES="${GEMM_EPILOGUE_FUZZ_CASES:-200}"
export GEMM_EPILOGUE_REQUIRE_GPU=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xJf mutants.tar.xz -C "$tmp"
chmod -R u+x "$tmp"
if [ $# -gt 0 ]; then mutants=("$@"); else mutants=($(ls "$tmp" | sort -n)); fi
# One mutant's tests, in order; prints its lines and, last, its summary line.
one() {
    local n=$1 failed=() t log rc line
    for exe in "$tmp/$n"/*; do
        t=$(basename "$exe")
        log="$tmp/$n-$t.log"
        # The control runs the fuzz test's full 500 cases; the mutants fewer.
        if [ "$n" = 0 ]; then cases=500; else cases=$GEMM_EPILOGUE_FUZZ_CASES; fi
        GEMM_EPILOGUE_FUZZ_CASES=$cases timeout "$LIMIT" "$exe" ${MUTANT_TEST_THREADS:+--test-threads=$MUTANT_TEST_THREADS} >"$log" 2>&1
        rc=$?
        if [ $rc -eq 124 ]; then
            failed+=("$t(TIMEOUT)")
        else
            while read -r name; do failed+=("$t::$name"); done < <(grep -E '^test .* \.\.\. FAILED$' "$log" | awk '{print $2}')
            [ $rc -ne 0 ] && [ ${#failed[@]} -eq 0 ] && failed+=("$t(exit $rc)")
        fi
        echo "--- mutant $n, $t: exit $rc; $(grep -E '^test result:' "$log" | tail -1)"
        grep -E 'panicked at|differ|outside the|not written|fuzz FAILED' "$log" | head -3 | cut -c1-300
    done
    if [ "$n" = 0 ]; then
        if [ ${#failed[@]} -eq 0 ]; then line="control (unmutated): all tests pass"; else line="control (unmutated): FAILED ${failed[*]}"; fi
    elif [ ${#failed[@]} -eq 0 ]; then
        line="mutant $n: SURVIVED (no test failed)"
    else
        line="mutant $n: caught by ${failed[*]}"
    fi
    echo "== $line"
}
# Every mutant at once (MUTANT_JOBS=1: one after another): the GPU runs the processes side by
# side, and a mutant's tests are independent of the others'.
for n in "${mutants[@]}"; do
    one "$n" >"$tmp/$n.out" 2>&1 &
    [ "${MUTANT_JOBS:-0}" = 1 ] && wait
done
wait
status=0
for n in "${mutants[@]}"; do cat "$tmp/$n.out"; done
echo
echo "== summary"
for n in "${mutants[@]}"; do
    line=$(tail -1 "$tmp/$n.out")
    echo "${line#== }"
    case "$line" in *SURVIVED*|*FAILED*|"") status=1 ;; esac
done
exit $status
RUNNER
chmod +x "$OUT/run"
echo "packed: $(du -sh "$OUT/mutants.tar.xz" | cut -f1) in $OUT; on the GPU machine: bash $OUT/run" >&2
