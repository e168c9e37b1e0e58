//! Compiles every translation unit of `csrc/units/` with nvcc into a fatbin of its own (SASS for
//! sm_80 and sm_90a, PTX for newer chips), the units side by side, and writes
//! `$OUT_DIR/units.rs`: the fatbins (`include_bytes!`) and which unit holds which kernel, which
//! `src/kernels/loaded.rs` loads through cudarc. Several units rather than one so that a build
//! on few cores keeps them all busy: one unit's sm_90a chain (cicc, then ptxas) alone took longer
//! than the rest of the build.
//!
//! nvcc is looked for, in order: `$NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `PATH`,
//! `/usr/local/cuda/bin`, and the project-local prefix that `.ci/setup-toolchain` fills from PyPI.
//! Nothing is downloaded here. The Rust side of the kernel-facing structs is not generated on a
//! normal build (that would need libclang in every dependent crate): `src/sys/bindings.rs` is
//! committed, `tests/bindings.rs` proves it matches `csrc/include/gemm_epilogue.h`, and
//! `cargo build --features regen-bindings` rewrites it after the header changed.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const UNITS: &str = "csrc/units";
/// Real SASS for the two targets we tune for, and PTX for everything newer.
const GENCODE: [&str; 3] = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_80,code=compute_80",
];
const MIN_NVCC_MAJOR: u32 = 12;

/// One translation unit: its name (the file stem), its source, and where its fatbin goes.
struct Unit {
    name: String,
    source: PathBuf,
    fatbin: PathBuf,
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    list_inputs(&manifest.join("csrc"));
    #[cfg(feature = "regen-bindings")]
    {
        find_libclang(&manifest);
        let header = manifest.join("csrc/include/gemm_epilogue.h");
        std::fs::write(manifest.join("src/sys/bindings.rs"), generate_bindings(&header))
            .unwrap_or_else(|e| fail(&format!("cannot write src/sys/bindings.rs: {e}")));
    }
    // `ge_mutation = "n"`: the host side of a deliberate bug (tests only, see below).
    println!("cargo:rustc-check-cfg=cfg(ge_mutation, values(any()))");
    for var in ["NVCC", "CUDA_HOME", "CUDA_PATH", "GEMM_EPILOGUE_NVCC_FLAGS", "GEMM_EPILOGUE_MUTATION", "DOCS_RS"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let units = find_units(&manifest, &out_dir);

    if env::var_os("DOCS_RS").is_some() {
        // docs.rs has no CUDA toolkit: document the API against empty images.
        for unit in &units {
            write(&unit.fatbin, b"");
        }
        write(&out_dir.join("nvcc-resource-usage.txt"), b"");
        write(&out_dir.join("units.rs"), units_rs(&units, &vec![String::new(); units.len()]).as_bytes());
        return;
    }

    let nvcc = find_nvcc(&manifest).unwrap_or_else(|| fail(NO_NVCC));
    check_version(&nvcc);

    // cc supplies the usual conventions (host compiler, -Xcompiler flags, $NVCC_FLAGS-style
    // overrides); we ask nvcc for a fatbin instead of an object.
    // SAFETY: build scripts are single-threaded; cc reads NVCC from the process environment.
    env::set_var("NVCC", &nvcc);
    let mut build = cc::Build::new();
    build.cuda(true).cargo_metadata(false).warnings(false).debug(false).opt_level(3);
    let compiler = build.get_compiler();
    let mutation = mutation();
    let command = |unit: &Unit| {
        let mut cmd = compiler.to_command();
        // `--threads 2`: the unit's sm_80 and sm_90a chains (cicc, ptxas) run side by side.
        // `-compress-all`: every image compressed (nvcc's default compresses only large fatbins).
        cmd.args([
            "-std=c++17",
            "-O3",
            "-lineinfo",
            "-Xptxas=-v",
            "-Xfatbin=-compress-all",
            "-fatbin",
            "--threads",
            "2",
        ])
        .args(GENCODE)
        .arg("-I")
        .arg(manifest.join("csrc/include"))
        .arg("-o")
        .arg(&unit.fatbin)
        .arg(&unit.source);
        if let Ok(extra) = env::var("GEMM_EPILOGUE_NVCC_FLAGS") {
            cmd.args(extra.split_whitespace());
        }
        if let Some(n) = &mutation {
            cmd.arg(format!("-DGE_MUTATION={n}"));
        }
        cmd
    };
    let reports = compile_all(&units, command);

    // The ptxas resource reports (registers, smem, spills) are kept next to the fatbins, one
    // unit after another.
    let log = out_dir.join("nvcc-resource-usage.txt");
    let mut all = String::new();
    for (unit, report) in units.iter().zip(&reports) {
        all.push_str(&format!("// unit {}\n{report}", unit.name));
    }
    write(&log, all.as_bytes());
    write(&out_dir.join("units.rs"), units_rs(&units, &reports).as_bytes());
    // Name the kernels that spill (only the crate's own developers see build-script warnings).
    let mut function = "";
    for line in all.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            function = rest.trim();
        } else if line.contains("spill stores") && !line.contains(" 0 bytes spill stores") {
            println!("cargo:warning={function}: {} (report: {})", line.trim(), log.display());
        }
    }
}

/// Tests only: `GEMM_EPILOGUE_MUTATION=<n>` compiles the kernels with one deliberate bug (the
/// `#if GE_MUTATION == n` hooks in csrc/common/, and the `cfg!(ge_mutation = "n")` ones in
/// src/), so tools/mutation_run.sh can prove that the oracles catch it. Unset (the default): no
/// hook is compiled in.
fn mutation() -> Option<String> {
    let n = env::var("GEMM_EPILOGUE_MUTATION").ok()?;
    let n = n.trim().to_string();
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n == "0" {
        fail(&format!("GEMM_EPILOGUE_MUTATION={n:?}: expected a mutation number (1, 2, ...)"));
    }
    println!("cargo:warning=GEMM_EPILOGUE_MUTATION={n}: the kernels are built with deliberate bug #{n} (tests only)");
    println!("cargo:rustc-cfg=ge_mutation=\"{n}\"");
    Some(n)
}

/// The `.cu` files of csrc/units/, by name.
fn find_units(manifest: &Path, out_dir: &Path) -> Vec<Unit> {
    let dir = manifest.join(UNITS);
    let mut units: Vec<Unit> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", dir.display())))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|source| {
            let name = source.file_stem().and_then(|s| s.to_str()).map(str::to_string);
            let name =
                name.filter(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).unwrap_or_else(|| {
                    fail(&format!("{}: a unit's name must be ASCII letters, digits and _", source.display()))
                });
            let fatbin = out_dir.join(format!("{name}.fatbin"));
            Unit { name, source, fatbin }
        })
        .collect();
    units.sort_by(|a, b| a.name.cmp(&b.name));
    if units.is_empty() {
        fail(&format!("no .cu file in {}", dir.display()));
    }
    units
}

/// Runs every unit's nvcc, at most cargo's job count at once, and returns each one's stderr
/// (ptxas's report); stops the build at the first failure, with its output.
fn compile_all(units: &[Unit], command: impl Fn(&Unit) -> Command + Sync) -> Vec<String> {
    let jobs = env::var("NUM_JOBS").ok().and_then(|j| j.parse::<usize>().ok()).unwrap_or(1).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Each worker takes the next unit until none is left and returns (index, report) pairs.
    let done: Vec<(usize, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.min(units.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(unit) = units.get(i) else { return done };
                        let mut cmd = command(unit);
                        let output = cmd
                            .output()
                            .unwrap_or_else(|e| fail(&format!("could not run nvcc for {}: {e}", unit.name)));
                        let report = String::from_utf8_lossy(&output.stderr).into_owned();
                        if !output.status.success() {
                            eprintln!("{report}");
                            fail(&format!(
                                "nvcc failed compiling {} ({}); command: {cmd:?}",
                                unit.source.display(),
                                output.status
                            ));
                        }
                        done.push((i, report));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|_| fail("an nvcc worker thread panicked"))).collect()
    });
    let mut reports = vec![String::new(); units.len()];
    for (i, report) in done {
        reports[i] = report;
    }
    reports
}

/// `units.rs`: the fatbins, and each kernel's unit as ptxas reported compiling it.
fn units_rs(units: &[Unit], reports: &[String]) -> String {
    let mut rs =
        String::from("// Written by build.rs: one fatbin per file of csrc/units/, and the unit of each entry.\n");
    rs.push_str(&format!("pub(crate) static UNITS: [Unit; {}] = [\n", units.len()));
    for unit in units {
        rs.push_str(&format!(
            "    Unit {{ name: {:?}, fatbin: include_bytes!({:?}) }},\n",
            unit.name,
            unit.fatbin.display().to_string()
        ));
    }
    rs.push_str("];\n");
    let mut entries: Vec<(String, usize)> = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        for line in report.lines() {
            let Some(rest) = line.split("Compiling entry function '").nth(1) else { continue };
            let Some(name) = rest.split('\'').next() else { continue };
            match entries.iter().find(|(n, _)| n == name) {
                None => entries.push((name.to_string(), i)),
                Some((_, j)) if *j != i => {
                    fail(&format!("kernel {name} is in two units, {} and {}", units[*j].name, units[i].name))
                }
                Some(_) => {} // the same unit's other architecture
            }
        }
    }
    entries.sort();
    rs.push_str(&format!("pub(crate) static ENTRY_UNITS: [(&str, usize); {}] = [\n", entries.len()));
    for (name, i) in entries {
        rs.push_str(&format!("    ({name:?}, {i}),\n"));
    }
    rs.push_str("];\n");
    rs
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
}

/// Emits rerun-if-changed for every file under csrc/ (and the folders, for added files).
fn list_inputs(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", dir.display())))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            list_inputs(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

fn find_nvcc(manifest: &Path) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("NVCC") {
        candidates.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = env::var_os(var) {
            candidates.push(Path::new(&root).join("bin/nvcc"));
        }
    }
    if let Some(path) = env::var_os("PATH") {
        candidates.extend(env::split_paths(&path).map(|d| d.join("nvcc")));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates.push(manifest.join(".toolchain/py/nvidia/cu13/bin/nvcc"));
    // nvcc must be called by its real path: through a symlink the PyPI build misses its headers.
    candidates.into_iter().filter(|p| p.is_file()).find_map(|p| p.canonicalize().ok())
}

fn check_version(nvcc: &Path) {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run {} --version: {e}", nvcc.display())));
    let text = String::from_utf8_lossy(&out.stdout);
    let major =
        text.split("release ").nth(1).and_then(|r| r.split('.').next()).and_then(|m| m.trim().parse::<u32>().ok());
    match major {
        Some(m) if m >= MIN_NVCC_MAJOR => {}
        Some(m) => fail(&format!(
            "{} is CUDA {m}; gemm-epilogue needs nvcc >= {MIN_NVCC_MAJOR} (sm_90a, wgmma).\n{NO_NVCC}",
            nvcc.display()
        )),
        None => fail(&format!("cannot read the version of {} from:\n{text}", nvcc.display())),
    }
}

const NO_NVCC: &str = "\
gemm-epilogue compiles its CUDA kernels at build time and needs nvcc (CUDA >= 12).
Looked in: $NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin, <crate>/.toolchain.
Either install the CUDA toolkit and set CUDA_HOME (or NVCC=/path/to/nvcc), or, in this repository,
run `bash .ci/setup-toolchain`, which installs the pinned nvcc 13.0 from PyPI into .toolchain/.";

#[cfg(feature = "regen-bindings")]
include!("build/bindgen_config.rs");

/// Stops the build with a message and no backtrace.
fn fail(msg: &str) -> ! {
    eprintln!("\nerror: {msg}\n");
    exit(1)
}
