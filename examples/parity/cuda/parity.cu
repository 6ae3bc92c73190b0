// The CUDA C side of the benchmarks: the algorithms of src/kernels.rs written as CUDA C usually
// is (one thread per element, `const T* __restrict__` inputs, `int` indices), built with
// `nvcc -O3 -arch=sm_90 -cubin` on the GPU machine and launched by the `parity` binary through
// the driver. Each template has an `extern "C"` instance per element type, `NAME_f32`/`NAME_f64`.

template <typename T> struct Eos { T emin, pmin, pcut, c1; };
template <typename T> struct Weights { T centre, face, edge, corner; };

template <typename T>
__device__ void eos(Eos<T> k, const T* __restrict__ e_old, const T* __restrict__ delv,
                    const T* __restrict__ p_old, const T* __restrict__ q_old,
                    const T* __restrict__ compression, T* __restrict__ e_new,
                    T* __restrict__ p_new, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T e = e_old[i] - T(0.5) * delv[i] * (p_old[i] + q_old[i]);
    if (e < k.emin) e = k.emin;
    T p = k.c1 * (compression[i] + T(1)) * e;
    if (fabs(p) < k.pcut) p = T(0);
    if (p < k.pmin) p = k.pmin;
    e_new[i] = e;
    p_new[i] = p;
}

#define WINDOW 8

template <typename T>
__device__ void window_sum(const T* __restrict__ x, T* __restrict__ sums, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T s = T(0);
#pragma unroll
    for (int k = 0; k < WINDOW; k++) s += x[i + k];
    sums[i] = s;
}

template <typename T>
__device__ void gather(const unsigned* __restrict__ index, const T* __restrict__ x,
                       T* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[index[i]];
}

template <typename T>
__device__ void scatter(const unsigned* __restrict__ index, const T* __restrict__ x,
                        T* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[index[i]] = x[i];
}

template <typename T>
__device__ void stencil2d(int nx, int ny, Weights<T> w, const T* __restrict__ in,
                          T* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx * ny) return;
    int x = i % nx, y = i / nx;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = w.centre * in[i] + w.face * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}

template <typename T>
__device__ void stencil7(int nx, int ny, int nz, Weights<T> w, const T* __restrict__ in,
                         T* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx * ny * nz) return;
    int x = i % nx, y = i / nx % ny, z = i / (nx * ny);
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
        out[i] = in[i];
        return;
    }
    int sy = nx, sz = nx * ny;
    out[i] = w.centre * in[i] + w.face * (in[i - 1] + in[i + 1] + in[i - sy] + in[i + sy] +
                                          in[i - sz] + in[i + sz]);
}

template <typename T>
__device__ void stencil27(int nx, int ny, int nz, Weights<T> w, const T* __restrict__ in,
                          T* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx * ny * nz) return;
    int x = i % nx, y = i / nx % ny, z = i / (nx * ny);
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) {
        out[i] = in[i];
        return;
    }
    int sy = nx, sz = nx * ny;
    T face = T(0), edge = T(0), corner = T(0);
#pragma unroll
    for (int dz = -1; dz <= 1; dz++)
#pragma unroll
        for (int dy = -1; dy <= 1; dy++)
#pragma unroll
            for (int dx = -1; dx <= 1; dx++) {
                T v = in[i + dz * sz + dy * sy + dx];
                int d = abs(dx) + abs(dy) + abs(dz);
                if (d == 1) face += v;
                else if (d == 2) edge += v;
                else if (d == 3) corner += v;
            }
    out[i] = w.centre * in[i] + w.face * face + w.edge * edge + w.corner * corner;
}

template <typename T>
__device__ void corners(int nx, int ny, int nz, const T* __restrict__ nodes,
                        T* __restrict__ cells) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= nx * ny * nz) return;
    int x = c % nx, y = c / nx % ny, z = c / (nx * ny);
    int sy = nx + 1, sz = (nx + 1) * (ny + 1);
    const T* p = nodes + z * sz + y * sy + x;
    T sum = p[0] + p[1] + p[sy] + p[sy + 1] + p[sz] + p[sz + 1] + p[sz + sy] + p[sz + sy + 1];
    cells[c] = T(0.125) * sum;
}

#define P 8

template <typename T>
__device__ void contract(const T* __restrict__ d, const T* __restrict__ u, T* __restrict__ w) {
    int e = blockIdx.x;
    int k = threadIdx.x, j = threadIdx.y, i = threadIdx.z;
    const T* ue = u + e * P * P * P;
    T s = T(0);
#pragma unroll
    for (int l = 0; l < P; l++) {
        s += d[i * P + l] * ue[(l * P + j) * P + k] + d[j * P + l] * ue[(i * P + l) * P + k] +
             d[k * P + l] * ue[(i * P + j) * P + l];
    }
    w[e * P * P * P + (i * P + j) * P + k] = s;
}

template <typename T>
__device__ void assemble(const T* __restrict__ k, const T* __restrict__ u, T* __restrict__ r,
                         int n) {
    extern __shared__ __align__(16) unsigned char shared[];
    T* flux = reinterpret_cast<T*>(shared);
    int tile = blockDim.x, t = threadIdx.x, first = blockIdx.x * tile;
    int e = first + t - 1;
    flux[t] = (e >= 0 && e + 1 < n) ? k[e] * (u[e + 1] - u[e]) : T(0);
    if (t == tile - 1) {
        int last = first + tile - 1;
        flux[tile] = (last + 1 < n) ? k[last] * (u[last + 1] - u[last]) : T(0);
    }
    __syncthreads();
    if (first + t < n) r[first + t] = flux[t] - flux[t + 1];
}

#define INSTANCES(T, S)                                                                          \
    extern "C" __global__ void eos_##S(Eos<T> k, const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c, const T* __restrict__ d,  \
                                       const T* __restrict__ e, T* __restrict__ f, T* __restrict__ g, int n) {                          \
        eos(k, a, b, c, d, e, f, g, n);                                                          \
    }                                                                                            \
    extern "C" __global__ void window_sum_##S(const T* __restrict__ x, T* __restrict__ s, int n) { window_sum(x, s, n); }  \
    extern "C" __global__ void gather_##S(const unsigned* __restrict__ i, const T* __restrict__ x, T* __restrict__ o, int n) {          \
        gather(i, x, o, n);                                                                      \
    }                                                                                            \
    extern "C" __global__ void scatter_##S(const unsigned* __restrict__ i, const T* __restrict__ x, T* __restrict__ o, int n) {         \
        scatter(i, x, o, n);                                                                     \
    }                                                                                            \
    extern "C" __global__ void stencil2d_##S(int nx, int ny, Weights<T> w, const T* __restrict__ in, T* __restrict__ out) { \
        stencil2d(nx, ny, w, in, out);                                                           \
    }                                                                                            \
    extern "C" __global__ void stencil7_##S(int nx, int ny, int nz, Weights<T> w, const T* __restrict__ in,   \
                                            T* __restrict__ out) {                                            \
        stencil7(nx, ny, nz, w, in, out);                                                        \
    }                                                                                            \
    extern "C" __global__ void stencil27_##S(int nx, int ny, int nz, Weights<T> w, const T* __restrict__ in,  \
                                             T* __restrict__ out) {                                           \
        stencil27(nx, ny, nz, w, in, out);                                                       \
    }                                                                                            \
    extern "C" __global__ void corners_##S(int nx, int ny, int nz, const T* __restrict__ nodes, T* __restrict__ cells) {   \
        corners(nx, ny, nz, nodes, cells);                                                       \
    }                                                                                            \
    extern "C" __global__ void contract_##S(const T* __restrict__ d, const T* __restrict__ u, T* __restrict__ w) { contract(d, u, w); } \
    extern "C" __global__ void assemble_##S(const T* __restrict__ k, const T* __restrict__ u, T* __restrict__ r, int n) {               \
        assemble(k, u, r, n);                                                                    \
    }

INSTANCES(float, f32)
INSTANCES(double, f64)
