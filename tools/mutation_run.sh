#!/usr/bin/env bash
# Builds the oracle test executables once per deliberate bug ("mutant") and packs them, with a
# runner, into .gpu-mutants/ (git-ignored), to prove on a GPU that the oracles catch each bug.
#
#   bash tools/mutation_run.sh [N ...]     # here (no GPU needed): build and pack; default: every
#                                          # `#if GE_MUTATION == N` hook in csrc/common/ and
#                                          # `cfg!(ge_mutation = "N")` hook in src/
#   bash .gpu-mutants/run [N ...]          # on the GPU machine: run each mutant's tests and
#                                          # print which failed; a mutant nobody catches SURVIVED
#
# The hooks (csrc/common/): 1 CTA 0's last work item skips its last k-block
# (stream_k_schedule.cuh); 2 a stream-K finisher leaves out one partial (stream_k.cuh); 3 tile 1
# is never stored, tile 0 stored twice (tile_raster.cuh); 4 the kernels that round operands in
# registers truncate them (ptx.cuh); 5 exact TF32 ties round toward zero (ptx.cuh); 6 the plans
# that round on load get fp32 tensor maps, so the TMA does not round (src/gemm/launch.rs).
# Mutant 0 is the unmutated build, the control: every test must pass there.
#
# `GEMM_EPILOGUE_MUTATION=N` makes build.rs pass -DGE_MUTATION=N to nvcc. The builds use their
# own target directory (target/mutants), so the normal build's kernels are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

TESTS=(gpu_exact gpu_emulated gpu_fuzz gpu_rounding)
OUT=.gpu-mutants
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/mutants}"
# Smaller executables to carry to the GPU machine.
export CARGO_PROFILE_RELEASE_STRIP=symbols

if [ $# -gt 0 ]; then
    mutants=("$@")
else
    mapfile -t found < <({ grep -rhoE 'GE_MUTATION == [0-9]+' csrc/common | awk '{print $3}'; grep -rhoE 'ge_mutation = "[0-9]+"' src | grep -oE '[0-9]+'; } | sort -un)
    mutants=(0 "${found[@]}")
fi

mkdir -p "$OUT"
test_args=()
for t in "${TESTS[@]}"; do test_args+=(--test "$t"); done

for n in "${mutants[@]}"; do
    echo "== mutant $n: building ${TESTS[*]}" >&2
    if [ "$n" = 0 ]; then unset GEMM_EPILOGUE_MUTATION; else export GEMM_EPILOGUE_MUTATION="$n"; fi
    json=$(nice -n 15 cargo test --release --no-run --message-format=json "${test_args[@]}")
    rm -rf "${OUT:?}/$n"
    mkdir -p "$OUT/$n"
    # One compiler-artifact line per test target, with the path of its executable.
    while IFS=$'\t' read -r name exe; do
        gzip -9 -c "$exe" >"$OUT/$n/$name.gz"
        echo "   $OUT/$n/$name.gz ($(du -h "$OUT/$n/$name.gz" | cut -f1))" >&2
    done < <(jq -r 'select(.reason == "compiler-artifact" and .executable != null and .target.kind == ["test"]) | [.target.name, .executable] | @tsv' <<<"$json")
    for t in "${TESTS[@]}"; do
        [ -f "$OUT/$n/$t.gz" ] || { echo "mutant $n: no executable for $t" >&2; exit 1; }
    done
done
unset GEMM_EPILOGUE_MUTATION

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
if [ $# -gt 0 ]; then mutants=("$@"); else mutants=($(ls -d */ | tr -d / | sort -n)); fi
status=0
summary=()
for n in "${mutants[@]}"; do
    failed=()
    for gz in "$n"/*.gz; do
        t=$(basename "$gz" .gz)
        gunzip -c "$gz" >"$tmp/$t" && chmod +x "$tmp/$t"
        log="$tmp/$n-$t.log"
        timeout "$LIMIT" "$tmp/$t" --test-threads=1 >"$log" 2>&1
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
        if [ ${#failed[@]} -eq 0 ]; then line="control (unmutated): all tests pass"; else line="control (unmutated): FAILED ${failed[*]}"; status=1; fi
    elif [ ${#failed[@]} -eq 0 ]; then
        line="mutant $n: SURVIVED (no test failed)"; status=1
    else
        line="mutant $n: caught by ${failed[*]}"
    fi
    summary+=("$line")
    echo "== $line"
done
echo
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
RUNNER
chmod +x "$OUT/run"
echo "packed: $(du -sh "$OUT" | cut -f1) in $OUT; on the GPU machine: bash $OUT/run" >&2
