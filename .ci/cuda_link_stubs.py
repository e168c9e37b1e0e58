#!/usr/bin/env python3
"""Stub CUDA libraries to link against where no CUDA toolkit libraries are installed.

With the `candle` feature, cudarc links libcuda, libnvrtc, libcublas, libcublasLt and libcurand
(candle-core asks for cudarc's `dynamic-linking`). A CI or build machine without a GPU has none
of them; a CUDA toolkit would bring `lib64/stubs/libcuda.so` and the others. This writes, into
OUT_DIR, one small shared library per name with the real SONAME (so executables built here
load the real libraries on a GPU machine) and every function cudarc declares for it, each
returning 34 (CUDA_ERROR_STUB_LIBRARY, what NVIDIA's own libcuda stub answers; an error status
for the other libraries too). On a machine without the driver, binaries linked against them
start with OUT_DIR on LD_LIBRARY_PATH, and gemm_epilogue::cuda_context returns NoDriver.

usage: cuda_link_stubs.py CUDARC_SRC_DIR OUT_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

# cudarc module -> (link name, SONAME of the CUDA 13 library)
LIBS = {
    "driver": ("cuda", "libcuda.so.1"),
    "nvrtc": ("nvrtc", "libnvrtc.so.13"),
    "cublas": ("cublas", "libcublas.so.13"),
    "cublaslt": ("cublasLt", "libcublasLt.so.13"),
    "curand": ("curand", "libcurand.so.10"),
}
# So that a status can still be printed: the driver's two error-string calls answer.
DRIVER_EXTRA = r"""
static const char stub_name[] = "CUDA_ERROR_STUB_LIBRARY";
static const char stub_text[] = "CUDA driver is a stub library";
int cuGetErrorName(int e, const char **s) { (void)e; *s = stub_name; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = stub_text; return 0; }
"""


def main(src, out):
    os.makedirs(out, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    for module, (name, soname) in LIBS.items():
        text = open(os.path.join(src, module, "sys", "mod.rs"), encoding="utf-8").read()
        symbols = sorted(set(re.findall(r"^pub unsafe fn (\w+)\(", text, re.M)))
        if not symbols:
            sys.exit(f"cuda_link_stubs: no functions found for {module} in {src}")
        extra = DRIVER_EXTRA if module == "driver" else ""
        skip = {"cuGetErrorName", "cuGetErrorString"} if extra else set()
        body = extra + "".join(f"int {s}(void) {{ return 34; }}\n" for s in symbols if s not in skip)
        with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as c:
            c.write(body)
        target = os.path.join(out, soname)
        subprocess.run([cc, "-shared", "-fPIC", "-O0", "-w", f"-Wl,-soname,{soname}", "-o", target, c.name], check=True)
        os.unlink(c.name)
        link = os.path.join(out, f"lib{name}.so")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(soname, link)
        print(f"cuda_link_stubs: {target} ({len(symbols)} functions)", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
