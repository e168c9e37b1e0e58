//! `src/sys/bindings.rs` is generated from `csrc/include/gemm_epilogue.h` by bindgen and committed,
//! so that crates depending on gemm-epilogue build without libclang. This test regenerates it and
//! fails when the committed file differs. To update it after editing the header:
//!
//!     cargo build --features regen-bindings
//!
//! libclang comes from `$LIBCLANG_PATH`, the system, or the PyPI wheel `.ci/setup-toolchain` puts
//! into `.toolchain/`.

use std::path::PathBuf;

use gemm_epilogue::sys;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

include!("../build/bindgen_config.rs");

#[test]
fn committed_bindings_match_the_header() {
    let root = manifest_dir();
    let header = root.join("csrc/include/gemm_epilogue.h");
    let committed_path = root.join("src/sys/bindings.rs");
    if !header.exists() {
        // Test executables copied to another machine (the GPU runner) lose the source tree.
        assert!(std::env::var_os("CI").is_none(), "{} is missing in CI", header.display());
        println!("skipped: {} is not on this machine", header.display());
        return;
    }
    find_libclang(&root);
    let fresh = generate_bindings(&header);
    let committed = std::fs::read_to_string(&committed_path).expect("read src/sys/bindings.rs");
    // Compared without whitespace: bindgen formats its output with rustfmt when it finds one.
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    assert!(
        squeeze(&committed) == squeeze(&fresh),
        "src/sys/bindings.rs is stale: csrc/include/gemm_epilogue.h changed. \
         Run `cargo build --features regen-bindings` and commit the result."
    );
}

#[test]
fn layouts_match_what_the_kernels_expect() {
    use std::mem::{align_of, offset_of, size_of};
    // cuda.h's CUtensorMap: 128 bytes, 64-byte aligned.
    assert_eq!(size_of::<sys::GeTensorMap>(), 128);
    assert_eq!(align_of::<sys::GeTensorMap>(), 64);
    assert_eq!(offset_of!(sys::GeSm90Params, x_map), 0);
    assert_eq!(offset_of!(sys::GeSm90Params, w_map), 128);
    assert_eq!(offset_of!(sys::GeSm90Params, w_small_map), 256);
    assert_eq!(offset_of!(sys::GeSm90Params, out_map), 384);
    assert_eq!(offset_of!(sys::GeSm90Params, problem), 512);
    // Pointers first, then 64-bit strides, the epilogue, then 32-bit fields: no interior padding.
    assert_eq!(offset_of!(sys::GeProblem, ldx), 32);
    assert_eq!(offset_of!(sys::GeProblem, epilogue), 56);
    assert_eq!(offset_of!(sys::GeProblem, m), 88);
    assert_eq!(size_of::<sys::GeProblem>(), 104);
    assert_eq!(offset_of!(sys::GeEpilogue, scale), 16);
    assert_eq!(offset_of!(sys::GeEpilogue, activation), 24);
    assert_eq!(size_of::<sys::GeEpilogue>(), 32);
    // Stream-K: three pointers, the launch number and the tile count, shared by both families.
    assert_eq!(offset_of!(sys::GeStreamK, ready), 8);
    assert_eq!(offset_of!(sys::GeStreamK, ticket), 16);
    assert_eq!(offset_of!(sys::GeStreamK, launch), 24);
    assert_eq!(offset_of!(sys::GeStreamK, tiles), 32);
    assert_eq!(size_of::<sys::GeStreamK>(), 40);
    assert_eq!(offset_of!(sys::GeSm90Params, stream_k), 512 + 104);
    // The elementwise pass: out, bias, ldo, the epilogue (as GeProblem's), then m and n.
    assert_eq!(offset_of!(sys::GeElementwiseParams, ldo), 16);
    assert_eq!(offset_of!(sys::GeElementwiseParams, epilogue), 24);
    assert_eq!(offset_of!(sys::GeElementwiseParams, m), 56);
    assert_eq!(offset_of!(sys::GeElementwiseParams, n), 60);
    assert_eq!(size_of::<sys::GeElementwiseParams>(), 64);
    // The repack's mode and the offset of a split's small parts.
    assert_eq!(offset_of!(sys::GeRepackParams, mode), 40);
    assert_eq!(offset_of!(sys::GeRepackParams, small_offset), 48);
    // Kernel parameters must stay well under the 4 KiB launch limit.
    assert!(size_of::<sys::GeSm90Params>() <= 4096);
}
