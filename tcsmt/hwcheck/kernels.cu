// tcsmt hardware check: batches of independent tiles through one matrix-unit
// instruction, chained in k order through the accumulator registers.
//
// Every kernel works on T tiles.  Tile t has
//   A[t]  M rows of K elements         (row-major: A[(t*M + r)*K + k])
//   B[t]  N columns of K elements      (column vectors: B[(t*N + n)*K + k])
//   C[t]  M x N accumulator inputs     (C[(t*M + r)*N + n])
// and the kernel writes D[t][r][n] = sum_k A[t][r][k] * B[t][n][k] + C[t][r][n]
// as the instruction computes it: C is loaded into the accumulator registers,
// then one instruction per k-slice [k0, k0 + instr_k) in increasing k0, each
// taking the previous instruction's D as its C, and D is stored as raw bits.
// No arithmetic other than the matrix instruction touches the values.
//
// Fragment placement follows the PTX ISA's documented register layouts
// (groupID = lane / 4, tig = lane % 4).  The harness checks every layout with
// small-integer inputs (exact results) before it trusts a kernel.
//
// mma.sync kernels: one warp per tile, any block size that is a multiple of 32.
// wgmma kernels (sm_90a): one warpgroup (a block of 128 threads) per tile, with
// B staged in shared memory in the no-swizzle core-matrix layout.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 pack2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

static __device__ __forceinline__ u32 pack4(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

#define TILE_LOOP(TILES_PER_UNIT_SHIFT)                                                        \
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;                           \
    const long long unit0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;           \
    const long long units = ((long long)gridDim.x * blockDim.x) >> 5;                          \
    for (long long tile = unit0; tile < T; tile += units)

// The operand rows of mma.sync tile `tile` that lane (g, t4) reads: A rows g (a0) and g + 8 (a1) of the tile's 16,
// B column g (b) of its 8; K elements of type TYPE each.
#define MMA_ROWS(TYPE)                                                                          \
    const TYPE* a0 = A + (tile * 16 + g) * (long long)K;                                        \
    const TYPE* a1 = a0 + 8LL * K;                                                              \
    const TYPE* b = B + (tile * 8 + g) * (long long)K

// The accumulator fragment of an m16n8 tile held by lane (g, t4): rows g and g + 8, columns 2*t4 and 2*t4 + 1 of
// the 16 x 8 block of C (D) that starts at element OFFSET (C and D are stored tile after tile, 128 raw patterns
// each: OFFSET = tile * 128 for mma.sync; a wgmma tile is four such blocks, one per warp).  f32: four floats
// d0..d3; f16: two registers d0, d1 of two packed halves each (the lower column in the low half).
#define C_FRAG_F32_LOAD(OFFSET)                                                                 \
    const u32* c = C + OFFSET;                                                                  \
    float d0 = __uint_as_float(c[g * 8 + 2 * t4]);                                              \
    float d1 = __uint_as_float(c[g * 8 + 2 * t4 + 1]);                                          \
    float d2 = __uint_as_float(c[(g + 8) * 8 + 2 * t4]);                                        \
    float d3 = __uint_as_float(c[(g + 8) * 8 + 2 * t4 + 1])
#define D_FRAG_F32_STORE(OFFSET)                                                                \
    do {                                                                                        \
        u32* d = D + OFFSET;                                                                    \
        d[g * 8 + 2 * t4] = __float_as_uint(d0);                                                \
        d[g * 8 + 2 * t4 + 1] = __float_as_uint(d1);                                            \
        d[(g + 8) * 8 + 2 * t4] = __float_as_uint(d2);                                          \
        d[(g + 8) * 8 + 2 * t4 + 1] = __float_as_uint(d3);                                      \
    } while (0)
#define C_FRAG_F16_LOAD(OFFSET)                                                                 \
    const u16* c = C + OFFSET;                                                                  \
    u32 d0 = pack2(c[g * 8 + 2 * t4], c[g * 8 + 2 * t4 + 1]);                                   \
    u32 d1 = pack2(c[(g + 8) * 8 + 2 * t4], c[(g + 8) * 8 + 2 * t4 + 1])
#define D_FRAG_F16_STORE(OFFSET)                                                                \
    do {                                                                                        \
        u16* d = D + OFFSET;                                                                    \
        d[g * 8 + 2 * t4] = (u16)(d0 & 0xffffu);                                                \
        d[g * 8 + 2 * t4 + 1] = (u16)(d0 >> 16);                                                \
        d[(g + 8) * 8 + 2 * t4] = (u16)(d1 & 0xffffu);                                          \
        d[(g + 8) * 8 + 2 * t4 + 1] = (u16)(d1 >> 16);                                          \
    } while (0)
#define WG_OFFSET (tile * 512 + (16 * w) * 8)

// The A fragment of an m16 tile at k = k0 + (2 or 4) * t4, rows a0 (g) and a1 (g + 8): four registers ra0..ra3.
// K16: 16-bit elements, two per register, at k, k + 1 and k + 8, k + 9; K32_F8: 8-bit elements, four per
// register, at k .. k + 3 and k + 16 .. k + 19 (the PTX ISA's m16n8k16 and m16n8k32 A layouts, shared by wgmma).
#define A_FRAG_K16                                                                              \
    u32 ra0 = pack2(a0[k], a0[k + 1]), ra1 = pack2(a1[k], a1[k + 1]);                           \
    u32 ra2 = pack2(a0[k + 8], a0[k + 9]), ra3 = pack2(a1[k + 8], a1[k + 9])
#define A_FRAG_K32_F8                                                                           \
    u32 ra0 = pack4(a0 + k), ra1 = pack4(a1 + k);                                               \
    u32 ra2 = pack4(a0 + k + 16), ra3 = pack4(a1 + k + 16)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

// ---------------------------------------------------------------- f16 / bf16 -> f32, m16n8k16
#define MMA_K16_F32(NAME, TYPE)                                                                 \
extern "C" __global__ void NAME(const u16* __restrict__ A, const u16* __restrict__ B,          \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u16);                                                                         \
        C_FRAG_F32_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 16) {                                                   \
            const int k = k0 + 2 * t4;                                                         \
            A_FRAG_K16;                                                                        \
            u32 rb0 = pack2(b[k], b[k + 1]), rb1 = pack2(b[k + 8], b[k + 9]);                  \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 "        \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"               \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        D_FRAG_F32_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_K16_F32(mma_f16_f32, "f16")
MMA_K16_F32(mma_bf16_f32, "bf16")

// ---------------------------------------------------------------- f16 -> f16, m16n8k16
extern "C" __global__ void mma_f16_f16(const u16* __restrict__ A, const u16* __restrict__ B,
                                       const u16* __restrict__ C, u16* __restrict__ D,
                                       long long T, int K) {
    TILE_LOOP(0) {
        MMA_ROWS(u16);
        C_FRAG_F16_LOAD(tile * 128);
        for (int k0 = 0; k0 < K; k0 += 16) {
            const int k = k0 + 2 * t4;
            A_FRAG_K16;
            u32 rb0 = pack2(b[k], b[k + 1]), rb1 = pack2(b[k + 8], b[k + 9]);
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                         "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                         : "+r"(d0), "+r"(d1)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
        }
        D_FRAG_F16_STORE(tile * 128);
    }
}

// ---------------------------------------------------------------- tf32 -> f32, m16n8k8
extern "C" __global__ void mma_tf32_f32(const u32* __restrict__ A, const u32* __restrict__ B,
                                        const u32* __restrict__ C, u32* __restrict__ D,
                                        long long T, int K) {
    TILE_LOOP(0) {
        MMA_ROWS(u32);
        C_FRAG_F32_LOAD(tile * 128);
        for (int k0 = 0; k0 < K; k0 += 8) {
            const int k = k0 + t4;
            u32 ra0 = a0[k], ra1 = a1[k], ra2 = a0[k + 4], ra3 = a1[k + 4];
            u32 rb0 = b[k], rb1 = b[k + 4];
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
        }
        D_FRAG_F32_STORE(tile * 128);
    }
}

// ---------------------------------------------------------------- f64, m8n8k4
extern "C" __global__ void mma_f64_f64(const double* __restrict__ A, const double* __restrict__ B,
                                       const double* __restrict__ C, double* __restrict__ D,
                                       long long T, int K) {
    TILE_LOOP(0) {
        const double* a = A + (tile * 8 + g) * (long long)K;
        const double* b = B + (tile * 8 + g) * (long long)K;
        const double* c = C + tile * 64;
        double d0 = c[g * 8 + 2 * t4], d1 = c[g * 8 + 2 * t4 + 1];
        for (int k0 = 0; k0 < K; k0 += 4) {
            double ra = a[k0 + t4], rb = b[k0 + t4];
            asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                         : "+d"(d0), "+d"(d1)
                         : "d"(ra), "d"(rb));
        }
        double* d = D + tile * 64;
        d[g * 8 + 2 * t4] = d0;
        d[g * 8 + 2 * t4 + 1] = d1;
    }
}

#endif  // sm_80

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890

// ---------------------------------------------------------------- e4m3 / e5m2 -> f32, m16n8k32
#define MMA_K32_F8(NAME, TA, TB)                                                                \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u8);                                                                          \
        C_FRAG_F32_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            A_FRAG_K32_F8;                                                                     \
            u32 rb0 = pack4(b + k), rb1 = pack4(b + k + 16);                                   \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 "            \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"               \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        D_FRAG_F32_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_K32_F8(mma_e4m3_f32, "e4m3", "e4m3")
MMA_K32_F8(mma_e5m2_f32, "e5m2", "e5m2")
MMA_K32_F8(mma_e4m3_e5m2_f32, "e4m3", "e5m2")  // mixed: A e4m3, B e5m2
MMA_K32_F8(mma_e5m2_e4m3_f32, "e5m2", "e4m3")

// ---------------------------------------------------------------- e4m3 / e5m2 -> f16, m16n8k32
#define MMA_K32_F8_F16(NAME, TA, TB)                                                            \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u16* __restrict__ C, u16* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u8);                                                                          \
        C_FRAG_F16_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            A_FRAG_K32_F8;                                                                     \
            u32 rb0 = pack4(b + k), rb1 = pack4(b + k + 16);                                   \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f16." TA "." TB ".f16 "            \
                         "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"                           \
                         : "+r"(d0), "+r"(d1)                                                  \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        D_FRAG_F16_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_K32_F8_F16(mma_e4m3_f16, "e4m3", "e4m3")
MMA_K32_F8_F16(mma_e5m2_f16, "e5m2", "e5m2")
MMA_K32_F8_F16(mma_e4m3_e5m2_f16, "e4m3", "e5m2")

#endif  // sm_89

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// ---------------------------------------------------------------- wgmma (sm_90a), m64n8kK
// A (64 x K) comes from registers: warp w of the warpgroup holds rows 16w..16w+15
// in the mma.sync A-fragment layout.  B (8 x K, K-major) is staged in shared
// memory as 8-row x 16-byte core matrices, core matrix j (bytes 16j..16j+15 of
// every column) at offset 128*j; one instruction reads two consecutive core
// matrices, so both descriptor offsets are 128 bytes (with N = 8 the
// N-direction offset is never used, so either reading of the two fields holds).

static __device__ __forceinline__ u64 smem_desc(const void* p) {
    u64 addr = (u64)__cvta_generic_to_shared(p);
    return ((addr & 0x3FFFFull) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(128 >> 4) << 32);
}

// Stage B[tile] (8 columns x K elements of ESIZE bytes) into the core-matrix layout.
static __device__ __forceinline__ void stage_b(u8* sB, const u8* Bt, int K, int esize) {
    const int row_bytes = K * esize;
    for (int i = threadIdx.x; i < 8 * row_bytes; i += blockDim.x) {
        const int n = i / row_bytes, byte = i % row_bytes;
        sB[(byte >> 4) * 128 + n * 16 + (byte & 15)] = Bt[i];
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
}

#define WG_BEGIN(ESIZE, KI)                                                                     \
    extern __shared__ __align__(128) u8 sB[];                                                  \
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;     \
    for (long long tile = blockIdx.x; tile < T; tile += gridDim.x) {                           \
        __syncthreads();                                                                       \
        stage_b(sB, (const u8*)B + tile * 8LL * K * ESIZE, K, ESIZE);                          \
        const long long row0 = tile * 64 + 16 * w + g;

#define WG_END }

// One wgmma.mma_async (the asm statement's text and operands as the arguments), fenced before, then committed
// and waited for: every instruction completes before the next reads its accumulator.
#define WGMMA_SYNC(...)                                                                         \
    do {                                                                                        \
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");                                 \
        asm volatile(__VA_ARGS__);                                                              \
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");                          \
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");                          \
    } while (0)

#define WGMMA_K16_F32(NAME, TYPE)                                                               \
extern "C" __global__ void NAME(const u16* __restrict__ A, const u16* __restrict__ B,          \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(2, 16)                                                                            \
        const u16* a0 = A + row0 * K;                                                          \
        const u16* a1 = a0 + 8LL * K;                                                          \
        C_FRAG_F32_LOAD(WG_OFFSET);                                                            \
        for (int k0 = 0; k0 < K; k0 += 16) {                                                   \
            const int k = k0 + 2 * t4;                                                         \
            A_FRAG_K16;                                                                        \
            u64 desc = smem_desc(sB + (k0 >> 3) * 128);                                        \
            WGMMA_SYNC("wgmma.mma_async.sync.aligned.m64n8k16.f32." TYPE "." TYPE " "          \
                       "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;"                         \
                       : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                \
                       : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");        \
        }                                                                                      \
        D_FRAG_F32_STORE(WG_OFFSET);                                                           \
    WG_END                                                                                     \
}

WGMMA_K16_F32(wgmma_f16_f32, "f16")
WGMMA_K16_F32(wgmma_bf16_f32, "bf16")

#define WGMMA_K32_F8_F32(NAME, TA, TB)                                                          \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(1, 32)                                                                            \
        const u8* a0 = A + row0 * K;                                                           \
        const u8* a1 = a0 + 8LL * K;                                                           \
        C_FRAG_F32_LOAD(WG_OFFSET);                                                            \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            A_FRAG_K32_F8;                                                                     \
            u64 desc = smem_desc(sB + (k0 >> 4) * 128);                                        \
            WGMMA_SYNC("wgmma.mma_async.sync.aligned.m64n8k32.f32." TA "." TB " "              \
                       "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;"                            \
                       : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                \
                       : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");        \
        }                                                                                      \
        D_FRAG_F32_STORE(WG_OFFSET);                                                           \
    WG_END                                                                                     \
}

WGMMA_K32_F8_F32(wgmma_e4m3_f32, "e4m3", "e4m3")
WGMMA_K32_F8_F32(wgmma_e5m2_f32, "e5m2", "e5m2")
WGMMA_K32_F8_F32(wgmma_e4m3_e5m2_f32, "e4m3", "e5m2")  // mixed: A e4m3, B e5m2
WGMMA_K32_F8_F32(wgmma_e5m2_e4m3_f32, "e5m2", "e4m3")

#define WGMMA_K32_F8_F16(NAME, TA, TB)                                                          \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u16* __restrict__ C, u16* __restrict__ D,                \
                                long long T, int K) {                                          \
    WG_BEGIN(1, 32)                                                                            \
        const u8* a0 = A + row0 * K;                                                           \
        const u8* a1 = a0 + 8LL * K;                                                           \
        C_FRAG_F16_LOAD(WG_OFFSET);                                                            \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            A_FRAG_K32_F8;                                                                     \
            u64 desc = smem_desc(sB + (k0 >> 4) * 128);                                        \
            WGMMA_SYNC("wgmma.mma_async.sync.aligned.m64n8k32.f16." TA "." TB " "              \
                       "{%0,%1}, {%2,%3,%4,%5}, %6, 1, 1, 1;"                                  \
                       : "+r"(d0), "+r"(d1)                                                    \
                       : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");        \
        }                                                                                      \
        D_FRAG_F16_STORE(WG_OFFSET);                                                           \
    WG_END                                                                                     \
}

WGMMA_K32_F8_F16(wgmma_e4m3_f16, "e4m3", "e4m3")
WGMMA_K32_F8_F16(wgmma_e5m2_f16, "e5m2", "e5m2")
WGMMA_K32_F8_F16(wgmma_e4m3_e5m2_f16, "e4m3", "e5m2")

// ---------------------------------------------------------------- wgmma tf32 -> f32, m64n8k8
// A (tf32 in the fp32 layout) in registers as the mma.sync m16n8k8 A fragment; B staged as for
// the 16-bit kernels with 4-byte elements (one instruction reads 32 bytes of every column: two
// core matrices, as the 16-bit and fp8 kernels).
extern "C" __global__ void wgmma_tf32_f32(const u32* __restrict__ A, const u32* __restrict__ B,
                                          const u32* __restrict__ C, u32* __restrict__ D,
                                          long long T, int K) {
    WG_BEGIN(4, 8)
        const u32* a0 = A + row0 * K;
        const u32* a1 = a0 + 8LL * K;
        C_FRAG_F32_LOAD(WG_OFFSET);
        for (int k0 = 0; k0 < K; k0 += 8) {
            const int k = k0 + t4;
            u32 ra0 = a0[k], ra1 = a1[k], ra2 = a0[k + 4], ra3 = a1[k + 4];
            u64 desc = smem_desc(sB + (k0 >> 2) * 128);
            WGMMA_SYNC("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
                       "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;"
                       : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                       : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");
        }
        D_FRAG_F32_STORE(WG_OFFSET);
    WG_END
}

// ---------------------------------------------------------------- wgmma f16 -> f16, m64n8k16
extern "C" __global__ void wgmma_f16_f16(const u16* __restrict__ A, const u16* __restrict__ B,
                                         const u16* __restrict__ C, u16* __restrict__ D,
                                         long long T, int K) {
    WG_BEGIN(2, 16)
        const u16* a0 = A + row0 * K;
        const u16* a1 = a0 + 8LL * K;
        C_FRAG_F16_LOAD(WG_OFFSET);
        for (int k0 = 0; k0 < K; k0 += 16) {
            const int k = k0 + 2 * t4;
            A_FRAG_K16;
            u64 desc = smem_desc(sB + (k0 >> 3) * 128);
            WGMMA_SYNC("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 "
                       "{%0,%1}, {%2,%3,%4,%5}, %6, 1, 1, 1, 0;"
                       : "+r"(d0), "+r"(d1)
                       : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "l"(desc) : "memory");
        }
        D_FRAG_F16_STORE(WG_OFFSET);
    WG_END
}

#endif  // sm_90a

// =================================================================================================
// Blackwell kernels.  NOT CHECKED ON HARDWARE: no B200 / RTX 50 GPU was available to this project.
// They compile with nvcc 13 (-arch=sm_120a, -arch=sm_100a) and their SASS was read (evidence/hopper_runs.md);
// `tcsmt hwcheck --layouts` on such a GPU checks their fragment layouts with exact small integers
// before any result is trusted.
// =================================================================================================

#if defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)

// ---------------------------------------------------------------- sm_120a mma.sync kind::f8f6f4, m16n8k32
// Every element travels in one byte per element (the pattern in its low bits, as tcsmt stores fp4/fp6).
// In the register fragment an fp6 (e3m2, e2m3) pattern occupies bits 5..0 of its 8-bit container and an
// fp4 (e2m1) pattern bits 5..2 (SHIFT 2): our reading of the PTX ISA's container figure for
// .kind::f8f6f4; a wrong placement shows at once in the integer layout check.
static __device__ __forceinline__ u32 pack4s(const u8* p, int shift) {
    return ((u32)(p[0] << shift) & 0xffu) | (((u32)(p[1] << shift) & 0xffu) << 8) |
           (((u32)(p[2] << shift) & 0xffu) << 16) | (((u32)(p[3] << shift) & 0xffu) << 24);
}

#define MMA_F8F6F4(NAME, TA, TB, SHIFT_A, SHIFT_B)                                                  \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K) {                                          \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u8);                                                                          \
        C_FRAG_F32_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4s(a0 + k, SHIFT_A), ra1 = pack4s(a1 + k, SHIFT_A);                  \
            u32 ra2 = pack4s(a0 + k + 16, SHIFT_A), ra3 = pack4s(a1 + k + 16, SHIFT_A);        \
            u32 rb0 = pack4s(b + k, SHIFT_B), rb1 = pack4s(b + k + 16, SHIFT_B);               \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32." TA "." TB ".f32 " \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"               \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));        \
        }                                                                                      \
        D_FRAG_F32_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_F8F6F4(sm120_f8f6f4_e4m3_f32, "e4m3", "e4m3", 0, 0)
MMA_F8F6F4(sm120_f8f6f4_e5m2_f32, "e5m2", "e5m2", 0, 0)
MMA_F8F6F4(sm120_f8f6f4_e3m2_f32, "e3m2", "e3m2", 0, 0)
MMA_F8F6F4(sm120_f8f6f4_e2m3_f32, "e2m3", "e2m3", 0, 0)
MMA_F8F6F4(sm120_f8f6f4_e2m1_f32, "e2m1", "e2m1", 2, 2)

// ---------------------------------------------------------------- sm_120a block-scaled mma.sync
// Scales: SA (T, 16, K / BLOCK) and SB (T, 8, K / BLOCK) bytes (ue8m0 or ue4m3 patterns), one per row of A /
// column of B and block of BLOCK products; a null pointer means every scale is 1 (ue8m0 0x7f, ue4m3 0x38).
// Scale registers (scale-a-data with {byte-id, thread-id} = {0, 0}): lane (g, t4) holds for A the scales of
// row g + 8 * (t4 & 1), byte v for the v-th block of the instruction; for B those of column g (lanes t4 = 0).
// Source: PTX ISA 9.7.14.3 "Block Scaling for mma.sync" (scale_A is M x 1/2/4 for scale_vec::1X/2X/4X, scale_B
// 1/2/4 x N; {byte-id, thread-id} select the byte and the threads of the quad that supply SF_A / SF_B), our
// reading of its thread-id-0 layout figures; the same placement as public sm_120 kernels (CUTLASS's SM120
// block-scaled MMA atoms pass tid = bid = 0).  The host packs scale_A as (T, 16, K / BLOCK) and scale_B as
// (T, 8, K / BLOCK) bytes (tcsmt/hwcheck/runner.py tile_scales); a wrong placement shows in `tcsmt hwcheck --layouts`
// only with unequal scales, so the decision bundles' varied scales are the first real check.
static __device__ __forceinline__ u32 scale_word(const u8* s, long long row, int nblk_total, int blk0, int nblk,
                                                 u8 one) {
    u32 w = 0;
    for (int v = 0; v < nblk; v++) w |= (u32)(s ? s[row * nblk_total + blk0 + v] : one) << (8 * v);
    return w;
}

#define MMA_MXF8F6F4(NAME, TA, TB, SHIFT)                                                          \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K, const u8* __restrict__ SA,                 \
                                const u8* __restrict__ SB) {                                   \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u8);                                                                          \
        const int nb = K / 32;                                                                 \
        C_FRAG_F32_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 32) {                                                   \
            const int k = k0 + 4 * t4;                                                         \
            u32 ra0 = pack4s(a0 + k, SHIFT), ra1 = pack4s(a1 + k, SHIFT);                      \
            u32 ra2 = pack4s(a0 + k + 16, SHIFT), ra3 = pack4s(a1 + k + 16, SHIFT);            \
            u32 rb0 = pack4s(b + k, SHIFT), rb1 = pack4s(b + k + 16, SHIFT);                   \
            u32 sa = scale_word(SA, tile * 16 + g + 8 * (t4 & 1), nb, k0 / 32, 1, 0x7f);       \
            u32 sb = scale_word(SB, tile * 8 + g, nb, k0 / 32, 1, 0x7f);                       \
            asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X" \
                         ".f32." TA "." TB ".f32.ue8m0 "                                       \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, "              \
                         "%10, {%11,%12}, %13, {%14,%15};"                                     \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1),         \
                           "r"(sa), "h"((u16)0), "h"((u16)0), "r"(sb), "h"((u16)0), "h"((u16)0)); \
        }                                                                                      \
        D_FRAG_F32_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_MXF8F6F4(sm120_mxf8f6f4_e4m3_f32, "e4m3", "e4m3", 0)
MMA_MXF8F6F4(sm120_mxf8f6f4_e2m1_f32, "e2m1", "e2m1", 2)

// kind::mxf4nvf4, m16n8k64: e2m1 packed two per byte (element k in the low nibble when k is even); lane (g, t4)
// holds A rows g, g+8 at k 8*t4 .. 8*t4+7 and 8*t4+32 .. +39, B column g at the same k.  BLOCK 32 (scale_vec::2X,
// ue8m0) or 16 (scale_vec::4X, ue4m3 or ue8m0).
static __device__ __forceinline__ u32 pack8_e2m1(const u8* p) {
    u32 w = 0;
    for (int j = 0; j < 8; j++) w |= (u32)(p[j] & 0xf) << (4 * j);
    return w;
}

#define MMA_MXF4NVF4(NAME, VEC, SFMT, BLOCK, ONE)                                                   \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,            \
                                const u32* __restrict__ C, u32* __restrict__ D,                \
                                long long T, int K, const u8* __restrict__ SA,                 \
                                const u8* __restrict__ SB) {                                   \
    TILE_LOOP(0) {                                                                             \
        MMA_ROWS(u8);                                                                          \
        const int nb = K / BLOCK;                                                              \
        C_FRAG_F32_LOAD(tile * 128);                                                           \
        for (int k0 = 0; k0 < K; k0 += 64) {                                                   \
            const int k = k0 + 8 * t4;                                                         \
            u32 ra0 = pack8_e2m1(a0 + k), ra1 = pack8_e2m1(a1 + k);                            \
            u32 ra2 = pack8_e2m1(a0 + k + 32), ra3 = pack8_e2m1(a1 + k + 32);                  \
            u32 rb0 = pack8_e2m1(b + k), rb1 = pack8_e2m1(b + k + 32);                         \
            u32 sa = scale_word(SA, tile * 16 + g + 8 * (t4 & 1), nb, k0 / BLOCK, 64 / BLOCK, ONE); \
            u32 sb = scale_word(SB, tile * 8 + g, nb, k0 / BLOCK, 64 / BLOCK, ONE);            \
            asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale." VEC   \
                         ".f32.e2m1.e2m1.f32." SFMT " "                                        \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, "              \
                         "%10, {%11,%12}, %13, {%14,%15};"                                     \
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                              \
                         : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1),         \
                           "r"(sa), "h"((u16)0), "h"((u16)0), "r"(sb), "h"((u16)0), "h"((u16)0)); \
        }                                                                                      \
        D_FRAG_F32_STORE(tile * 128);                                                          \
    }                                                                                          \
}

MMA_MXF4NVF4(sm120_mxf4nvf4_b32_ue8m0_f32, "scale_vec::2X", "ue8m0", 32, 0x7f)
MMA_MXF4NVF4(sm120_mxf4nvf4_b16_ue4m3_f32, "scale_vec::4X", "ue4m3", 16, 0x38)

#endif  // sm_120a

#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)

// ---------------------------------------------------------------- sm_100a tcgen05.mma, cta_group::1, M = 128, N = 8
// One CTA of 128 threads per tile (tiles strided over the grid).  A (128 x K) and B (8 x K) are staged in shared
// memory, K-major without swizzling, as 8-row x 16-byte core matrices: core matrix (row group r, 16-byte chunk
// j) of A at byte 128 * (16 * j + r), of B at 128 * j.  Shared-memory descriptors (sm_100 format: start address,
// leading-dimension byte offset = the K-direction step between core matrices, stride byte offset = the M/N-
// direction step, version 1 in bits 46-47, no swizzle): A (2048, 128), B (128, 128).  One instruction reads
// 32 bytes of K (two chunks).  D (fp32) lives in tensor memory: row i of the tile in lane i, column n in
// column n of a 32-column allocation; thread i writes C there (tcgen05.st) before the first MMA, which thread
// 0 issues with enable-input-d, and reads D back (tcgen05.ld) after a commit to an mbarrier.
// Instruction descriptor (kind::tf32 / f16 / f8f6f4): D format F32 (1) in bits 4-5, A and B formats in bits
// 7-9 and 10-12 (f16 0, bf16 1, tf32 2; e4m3 0, e5m2 1), K-major A and B, N >> 3 in bits 17-22, M >> 4 in
// bits 24-28.
static __device__ __forceinline__ u64 umma_desc(const void* p, u32 lbo, u32 sbo) {
    u64 addr = (u64)__cvta_generic_to_shared(p);
    return ((addr & 0x3FFFFull) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32) |
           (1ull << 46);
}

static __device__ __forceinline__ void stage_rows(u8* s, const u8* g, int rows, int K, int esize) {
    const int row_bytes = K * esize;
    for (int i = threadIdx.x; i < rows * row_bytes; i += blockDim.x) {
        const int r = i / row_bytes, byte = i % row_bytes;
        s[(((byte >> 4) * (rows >> 3)) + (r >> 3)) * 128 + (r & 7) * 16 + (byte & 15)] = g[i];
    }
}

// One tcgen05 kernel's set-up, shared by the kernels below: COLS (a string, "32" or "128") tensor-memory
// columns allocated by warp 0, the mbarrier initialised, and the per-warp lane address of the accumulator.
#define TCGEN05_INIT(COLS)                                                                 \
    if (warp == 0) {                                                                           \
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], " COLS ";"\
                     :: "r"((u32)__cvta_generic_to_shared(&tmem_slot)) : "memory");            \
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory"); \
    }                                                                                          \
    if (tid == 0) {                                                                            \
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;"                                  \
                     :: "r"((u32)__cvta_generic_to_shared(&mbar)) : "memory");                 \
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");                     \
    }                                                                                          \
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                           \
    __syncthreads();                                                                           \
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                            \
    const u32 tmem = tmem_slot;                                                                \
    const u32 lane_addr = tmem + ((u32)(warp * 32) << 16);                                     \
    u32 phase = 0;

// One tcgen05 tile's tail, shared by the kernels below: wait for the MMAs (mbarrier phase), read the 128x8
// fp32 accumulator from tensor memory (32x32b.x8: one row per thread) and store it to D.
#define TCGEN05_WAIT_STORE()                                                               \
    asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"                                         \
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"              \
                 "@!done bra WAIT_%=;\n}"                                                  \
                 :: "r"((u32)__cvta_generic_to_shared(&mbar)), "r"(phase) : "memory");     \
    phase ^= 1;                                                                            \
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                        \
    u32 r[8];                                                                              \
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"  \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), \
                   "=r"(r[6]), "=r"(r[7]) : "r"(lane_addr) : "memory");                    \
    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");                           \
    u32* d = D + (tile * 128 + tid) * 8;                                                   \
    for (int n = 0; n < 8; n++) d[n] = r[n];                                               \
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                       \
    __syncthreads();

#define TCGEN05_F32(NAME, KIND, ETYPE, ESIZE, KI, AFMT, BFMT)                                       \
extern "C" __global__ void __launch_bounds__(128) NAME(const ETYPE* __restrict__ A,            \
        const ETYPE* __restrict__ B, const u32* __restrict__ C, u32* __restrict__ D, long long T, int K) { \
    extern __shared__ __align__(1024) u8 smem[];                                               \
    __shared__ __align__(8) u64 mbar;                                                          \
    __shared__ u32 tmem_slot;                                                                  \
    u8* sA = smem;                                                                             \
    u8* sB = smem + 128 * K * ESIZE;                                                           \
    const int tid = threadIdx.x, warp = tid >> 5;                                              \
    const u32 idesc = (1u << 4) | ((u32)(AFMT) << 7) | ((u32)(BFMT) << 10) | ((8u >> 3) << 17) | ((128u >> 4) << 24); \
    TCGEN05_INIT("32");                                                                    \
    for (long long tile = blockIdx.x; tile < T; tile += gridDim.x) {                           \
        stage_rows(sA, (const u8*)(A + tile * 128LL * K), 128, K, ESIZE);                      \
        stage_rows(sB, (const u8*)(B + tile * 8LL * K), 8, K, ESIZE);                          \
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                           \
        const u32* c = C + (tile * 128 + tid) * 8;                                             \
        asm volatile("tcgen05.st.sync.aligned.32x32b.x8.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};"  \
                     :: "r"(lane_addr), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), \
                        "r"(c[5]), "r"(c[6]), "r"(c[7]) : "memory");                           \
        asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");                           \
        asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                       \
        __syncthreads();                                                                       \
        if (tid == 0) {                                                                        \
            asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                    \
            for (int k0 = 0; k0 < K; k0 += KI) {                                               \
                const int chunk = (k0 * ESIZE) >> 4;                                           \
                u64 da = umma_desc(sA + chunk * 16 * 128, 2048, 128);                          \
                u64 db = umma_desc(sB + chunk * 128, 128, 128);                                \
                asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                        \
                             "tcgen05.mma.cta_group::1.kind::" KIND " [%0], %1, %2, %3, p;\n}"  \
                             :: "r"(tmem), "l"(da), "l"(db), "r"(idesc) : "memory");           \
            }                                                                                  \
            asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" \
                         :: "r"((u32)__cvta_generic_to_shared(&mbar)) : "memory");             \
        }                                                                                      \
        TCGEN05_WAIT_STORE();                                                                  \
    }                                                                                          \
    if (warp == 0)                                                                             \
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(tmem) : "memory"); \
}

// ---------------------------------------------------------------- sm_100a tcgen05.mma block_scale, M = 128, N = 8
// kind::mxf8f6f4 (e4m3 x e4m3, scale_vec::1X, ue8m0 per 32) and kind::mxf4nvf4 (e2m1 packed two per byte, element
// k in the low nibble when k is even; block32 = scale_vec::2X ue8m0, block16 = scale_vec::4X ue8m0 or ue4m3).
// Operands are staged as in TCGEN05_F32 (a row's bytes, 32 per instruction, two 16-byte core matrices).
// Instruction descriptor of the block-scaled kinds (PTX ISA, tcgen05 "Instruction descriptor", its table for
// .kind::mxf8f6f4 / mxf4nvf4; the same bits as CUTLASS's UMMA::InstrDescriptorBlockScaled): bits 4-5 scale-B ID, 7-9 A format and 10-12 B format (mxf8f6f4: e4m3 0, e5m2 1,
// e2m3 3, e3m2 4, e2m1 5; mxf4nvf4: e2m1 1, as public sm_100 NVFP4 kernels set it), 17-22 N >> 3, 23 scale format (ue4m3 0, ue8m0 1), 24-28 M >> 4,
// 29-30 scale-A ID; D is F32 (no D-format field), K-major A and B.
// Scale factors live in tensor memory (PTX ISA, tcgen05.mma "Block Scaling": scale_A is M x SFA_N,
// scale_B SFB_M x N, the scale-A/B ID choosing the byte of a 32-bit cell where the instruction's factors begin).
// Our reading of its layout figures for M = 128 (the layout public sm_100 kernels stage with tcgen05.cp 32x128b
// .warpx4): row r of scale_A in lane r % 32 of every 32-lane quarter, column r / 32 of the instruction's group of
// four columns, byte v = the instruction's v-th scale block; column n of scale_B in lane n, one column, byte v.
// Each thread writes the cells of its own lane with tcgen05.st (the contents depend on lane % 32 only, so every
// quarter holds the same copy).  Instruction i uses columns SFA_COL + 4 i .. + 3 and SFB_COL + i, IDs 0.  A wrong
// reading fails `tcsmt hwcheck --layouts`, which gives every row, column and block its own power-of-two scale.
#define SFA_COL 32
#define SFB_COL 96
static __device__ __forceinline__ void stage_rows_fp4(u8* s, const u8* g, int rows, int K) {
    const int row_bytes = K / 2;
    for (int i = threadIdx.x; i < rows * row_bytes; i += blockDim.x) {
        const int r = i / row_bytes, byte = i % row_bytes;
        const u8* e = g + (long long)r * K + 2 * byte;
        s[(((byte >> 4) * (rows >> 3)) + (r >> 3)) * 128 + (r & 7) * 16 + (byte & 15)] = (u8)((e[0] & 0xf) | (e[1] << 4));
    }
}

static __device__ __forceinline__ u32 sf_word(const u8* s, long long row, int nblk_total, int blk0, int nblk) {
    u32 w = 0;
    for (int v = 0; v < nblk; v++) w |= (u32)s[row * nblk_total + blk0 + v] << (8 * v);
    return w;
}

#define TCGEN05_SCALED(NAME, KIND, AFMT, BFMT, SFMT_UE8M0, KI, BLOCK, PACKED)                        \
extern "C" __global__ void __launch_bounds__(128) NAME(const u8* __restrict__ A, const u8* __restrict__ B,  \
        const u32* __restrict__ C, u32* __restrict__ D, long long T, int K, const u8* __restrict__ SA,   \
        const u8* __restrict__ SB) {                                                           \
    extern __shared__ __align__(1024) u8 smem[];                                               \
    __shared__ __align__(8) u64 mbar;                                                          \
    __shared__ u32 tmem_slot;                                                                  \
    const int kbytes = PACKED ? K / 2 : K;                                                     \
    u8* sA = smem;                                                                             \
    u8* sB = smem + 128 * kbytes;                                                              \
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;                             \
    const int nb = K / BLOCK, per = KI / BLOCK;                                                \
    const u32 idesc = ((u32)(AFMT) << 7) | ((u32)(BFMT) << 10) | ((8u >> 3) << 17) |            \
                      ((u32)(SFMT_UE8M0) << 23) | ((128u >> 4) << 24);                         \
    TCGEN05_INIT("128");                                                                   \
    for (long long tile = blockIdx.x; tile < T; tile += gridDim.x) {                           \
        if (PACKED) {                                                                          \
            stage_rows_fp4(sA, A + tile * 128LL * K, 128, K);                                  \
            stage_rows_fp4(sB, B + tile * 8LL * K, 8, K);                                      \
        } else {                                                                               \
            stage_rows(sA, A + tile * 128LL * K, 128, K, 1);                                   \
            stage_rows(sB, B + tile * 8LL * K, 8, K, 1);                                       \
        }                                                                                      \
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                           \
        const u32* c = C + (tile * 128 + tid) * 8;                                             \
        asm volatile("tcgen05.st.sync.aligned.32x32b.x8.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};"  \
                     :: "r"(lane_addr), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), \
                        "r"(c[5]), "r"(c[6]), "r"(c[7]) : "memory");                           \
        for (int i = 0; i < K / KI; i++) {                                                     \
            u32 w[4];                                                                          \
            for (int q = 0; q < 4; q++) w[q] = sf_word(SA, tile * 128 + lane + 32 * q, nb, i * per, per); \
            asm volatile("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1,%2,%3,%4};"          \
                         :: "r"(lane_addr + SFA_COL + 4 * i), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) \
                         : "memory");                                                          \
            u32 wb = sf_word(SB, tile * 8 + (lane & 7), nb, i * per, per);                     \
            asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};"                   \
                         :: "r"(lane_addr + SFB_COL + i), "r"(wb) : "memory");                 \
        }                                                                                      \
        asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");                           \
        asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");                       \
        __syncthreads();                                                                       \
        if (tid == 0) {                                                                        \
            asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");                    \
            for (int k0 = 0, i = 0; k0 < K; k0 += KI, i++) {                                   \
                const int chunk = (PACKED ? k0 / 2 : k0) >> 4;                                 \
                u64 da = umma_desc(sA + chunk * 16 * 128, 2048, 128);                          \
                u64 db = umma_desc(sB + chunk * 128, 128, 128);                                \
                asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                       \
                             "tcgen05.mma.cta_group::1.kind::" KIND " [%0], %1, %2, %3, [%4], [%5], p;\n}" \
                             :: "r"(tmem), "l"(da), "l"(db), "r"(idesc), "r"(tmem + SFA_COL + 4 * i), \
                                "r"(tmem + SFB_COL + i) : "memory");                           \
            }                                                                                  \
            asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" \
                         :: "r"((u32)__cvta_generic_to_shared(&mbar)) : "memory");             \
        }                                                                                      \
        TCGEN05_WAIT_STORE();                                                                  \
    }                                                                                          \
    if (warp == 0)                                                                             \
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" :: "r"(tmem) : "memory"); \
}

TCGEN05_SCALED(tcgen05_mxf8f6f4_e4m3_f32, "mxf8f6f4.block_scale.scale_vec::1X", 0, 0, 1, 32, 32, 0)
TCGEN05_SCALED(tcgen05_mxf4nvf4_b32_ue8m0_f32, "mxf4nvf4.block_scale.scale_vec::2X", 1, 1, 1, 64, 32, 1)
TCGEN05_SCALED(tcgen05_mxf4nvf4_b16_ue8m0_f32, "mxf4nvf4.block_scale.scale_vec::4X", 1, 1, 1, 64, 16, 1)
TCGEN05_SCALED(tcgen05_mxf4nvf4_b16_ue4m3_f32, "mxf4nvf4.block_scale.scale_vec::4X", 1, 1, 0, 64, 16, 1)

TCGEN05_F32(tcgen05_tf32_f32, "tf32", u32, 4, 8, 2, 2)
TCGEN05_F32(tcgen05_f16_f32, "f16", u16, 2, 16, 0, 0)
TCGEN05_F32(tcgen05_bf16_f32, "f16", u16, 2, 16, 1, 1)
TCGEN05_F32(tcgen05_e4m3_f32, "f8f6f4", u8, 1, 32, 0, 0)
TCGEN05_F32(tcgen05_e5m2_f32, "f8f6f4", u8, 1, 32, 1, 1)

#endif  // sm_100a
