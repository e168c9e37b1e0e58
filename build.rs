//! Compiles `csrc/kernels.cu` with nvcc into one fatbin (SASS for sm_80 and sm_90a, PTX for newer
//! chips) that `src/kernels/loaded.rs` embeds with `include_bytes!` and loads through cudarc.
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

const KERNELS: &str = "csrc/kernels.cu";
const FATBIN: &str = "gemm_epilogue.fatbin";
/// Real SASS for the two targets we tune for, and PTX for everything newer.
const GENCODE: [&str; 3] = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-gencode=arch=compute_80,code=compute_80",
];
const MIN_NVCC_MAJOR: u32 = 12;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let fatbin = out_dir.join(FATBIN);

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

    if env::var_os("DOCS_RS").is_some() {
        // docs.rs has no CUDA toolkit: document the API against an empty image.
        std::fs::write(&fatbin, []).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", fatbin.display())));
        let _ = std::fs::write(out_dir.join("nvcc-resource-usage.txt"), "");
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
    let mut cmd = build.get_compiler().to_command();
    // `--threads 2`: the sm_80 and sm_90a chains (cicc, ptxas) run side by side; the fatbin is
    // the same bytes, and each kernel's ptxas report stays in one piece.
    cmd.args(["-std=c++17", "-O3", "-lineinfo", "-Xptxas=-v", "-fatbin", "--threads", "2"])
        .args(GENCODE)
        .arg("-I")
        .arg(manifest.join("csrc/include"))
        .arg("-o")
        .arg(&fatbin)
        .arg(manifest.join(KERNELS));
    if let Ok(extra) = env::var("GEMM_EPILOGUE_NVCC_FLAGS") {
        cmd.args(extra.split_whitespace());
    }
    // Tests only: `GEMM_EPILOGUE_MUTATION=<n>` compiles the kernels with one deliberate bug (the
    // `#if GE_MUTATION == n` hooks in csrc/common/, and the `cfg!(ge_mutation = "n")` ones in
    // src/), so tools/mutation_run.sh can prove that the oracles catch it. Unset (the default):
    // no hook is compiled in.
    if let Ok(n) = env::var("GEMM_EPILOGUE_MUTATION") {
        let n = n.trim();
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n == "0" {
            fail(&format!("GEMM_EPILOGUE_MUTATION={n:?}: expected a mutation number (1, 2, ...)"));
        }
        println!(
            "cargo:warning=GEMM_EPILOGUE_MUTATION={n}: the kernels are built with deliberate bug #{n} (tests only)"
        );
        cmd.arg(format!("-DGE_MUTATION={n}"));
        println!("cargo:rustc-cfg=ge_mutation=\"{n}\"");
    }
    let output = cmd.output().unwrap_or_else(|e| fail(&format!("could not run {}: {e}", nvcc.display())));
    // The ptxas resource report (registers, smem, spills) is kept next to the fatbin.
    let log = out_dir.join("nvcc-resource-usage.txt");
    let _ = std::fs::write(&log, &output.stderr);
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        fail(&format!("nvcc failed compiling {KERNELS} ({}); command: {cmd:?}", output.status));
    }
    // Name the kernels that spill (only the crate's own developers see build-script warnings).
    let report = String::from_utf8_lossy(&output.stderr);
    let mut function = "";
    for line in report.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            function = rest.trim();
        } else if line.contains("spill stores") && !line.contains(" 0 bytes spill stores") {
            println!("cargo:warning={function}: {} (report: {})", line.trim(), log.display());
        }
    }
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
