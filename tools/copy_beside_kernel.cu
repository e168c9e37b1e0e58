// Does a same-device copy (cudaMemcpy2DAsync / cudaMemcpyAsync, device to device) run beside a
// kernel that holds every SM, or wait for SMs? The sharded layer's gathered forward places each
// gathered block into the output with such a copy while the next chunk's GEMM runs
// (src/sharded/gather.rs); docs/BENCHMARKS.md ("Two GPUs") has the answer measured.
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90 -o /tmp/cbk tools/copy_beside_kernel.cu && /tmp/cbk
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void hog(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

int main() {
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    size_t rows = 2048, width = 8192 * 4, pitch = 16384 * 4; // a 2048 x 8192 f32 block into 16384-wide rows
    float *src, *dst; CK(cudaMalloc(&src, rows * width)); CK(cudaMalloc(&dst, rows * pitch));
    cudaStream_t a, b; CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t h0, h1, c0, c1; cudaEventCreate(&h0); cudaEventCreate(&h1); cudaEventCreate(&c0); cudaEventCreate(&c1);
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, hog, 1024, 0));
    int grid = sms * occ;
    for (int mode = 0; mode < 4; ++mode) {
        for (int rep = 0; rep < 4; ++rep) {
            bool with_hog = mode & 1, one_d = mode & 2;
            if (with_hog) { cudaEventRecord(h0, a); hog<<<grid, 1024, 0, a>>>(3000000); cudaEventRecord(h1, a); }
            cudaEventRecord(c0, b);
            if (one_d) CK(cudaMemcpyAsync(dst, src, rows * width, cudaMemcpyDeviceToDevice, b));
            else CK(cudaMemcpy2DAsync(dst, pitch, src, width, width, rows, cudaMemcpyDeviceToDevice, b));
            cudaEventRecord(c1, b);
            CK(cudaDeviceSynchronize());
            float copy_ms, hog_ms = 0; cudaEventElapsedTime(&copy_ms, c0, c1);
            if (with_hog) cudaEventElapsedTime(&hog_ms, h0, h1);
            printf("%s copy of 64 MiB %s: copy done %.3f ms after start (hog %.3f ms, grid %d)\n", one_d ? "1-D" : "2-D", with_hog ? "next to a 3 ms all-SM hog" : "alone", copy_ms, hog_ms, grid);
        }
    }
    return 0;
}
