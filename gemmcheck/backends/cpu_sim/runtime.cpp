// gemmcheck's CPU simulator runtime: fibers, the block scheduler, shared-memory
// tracking and the worker loop.
//
// Built two ways from this one file:
//  - the worker (default): a long-lived process that dlopens kernel modules (built
//    with -fsanitize=thread for its instrumentation only: every load and store calls
//    __tsan_readN / __tsan_writeN, defined here) and runs launch requests that arrive
//    on a SOCK_SEQPACKET socket, on buffers passed as memfds. A crash or hang kills
//    only the worker; the Python side reports it and starts a new one.
//  - the AddressSanitizer runner (-DCUDASIM_ASAN_RUNNER, with the generated module
//    compiled in, -fsanitize=address): runs one launch on exact-size heap buffers read
//    from files, so an out-of-bounds access is an ASan report naming the kernel.
//
// One CUDA thread = one fiber with its own stack. A barrier (__syncthreads) parks the
// fiber; when no fiber of the block can run, the scheduler checks that every thread is
// parked at the same barrier (otherwise: a divergent barrier, recorded), then releases
// them all and starts the next barrier interval. Schedules differ only in the order the
// runnable fibers are resumed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cudasim.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#endif

// ---------------------------------------------------------------------------
// The report shared with the Python side (mirrored in cpu_sim/protocol.py).
// ---------------------------------------------------------------------------
enum { KIND_RAW = 1, KIND_WAR = 2, KIND_WAW = 3, KIND_UNINIT = 4 };
enum { SCHED_FORWARD = 0, SCHED_REVERSE = 1, SCHED_SHUFFLE = 2, SCHED_LOCKSTEP = 3 };
enum { MAX_POINTERS = 8, MAX_INTS = 16, MAX_RANGES = 1024, MAX_CONFLICTS = 16, MAX_DIVERGENT = 8, MAX_SITES = 4 };

struct cs_conflict
{
    uint32_t kind, interval, thread_a, thread_b;
    uint32_t block[3], pad;
    uint64_t address;  // module-relative (the Python side names the array from nm)
};
struct cs_site
{
    char file[48];
    int32_t line;
    uint32_t count, first_thread;
};
struct cs_divergence
{
    uint32_t block[3], interval;
    uint32_t nsites, exited, first_exited, pad;
    cs_site sites[MAX_SITES];
};
struct cs_report
{
    volatile uint64_t heartbeat;
    uint32_t state, signal;
    uint64_t fault_address;
    uint32_t cur_block[3], cur_thread;
    uint64_t counts[5];  // indexed by KIND_*; counts[0] unused
    uint64_t divergent;
    uint32_t nconflicts, ndivergent;
    cs_conflict conflicts[MAX_CONFLICTS];
    cs_divergence divergences[MAX_DIVERGENT];
};
struct cs_request
{
    char module[1024];
    int32_t kernel, npointers, nints, schedule;
    uint64_t seed;
    uint32_t grid[3], block[3];
    int32_t ints[MAX_INTS];
    uint64_t pointer_offset[MAX_POINTERS];  // into the memfd sent with the request, in order
    uint64_t pointer_length[MAX_POINTERS];  // bytes to map
    uint32_t nranges, track;  // track: 0 runs without shared-memory tracking (faster)
    uint64_t range_start[MAX_RANGES], range_size[MAX_RANGES];  // shared arrays, module-relative
};

// ---------------------------------------------------------------------------
// CUDA built-ins and state of the block being run
// ---------------------------------------------------------------------------
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

static cs_report scratch_report;
static cs_report *report = &scratch_report;

enum { RUNNABLE, AT_BARRIER, EXITED };
struct Fiber
{
    void *sp;
    char *stack;
    size_t stack_size;
    int state;
    const char *file;
    int line;
    uint3 tid;
#ifdef __SANITIZE_ADDRESS__
    void *fake_stack;
#endif
};

static std::vector<Fiber> fibers;
static int current = -1;                 // fiber running, -1: the scheduler
static void *scheduler_sp;
static cudasim_launcher kernel_fn;
static void *kernel_pointers[MAX_POINTERS];
static int kernel_ints[MAX_INTS];
static bool lockstep;
static long long sim_clock;
static const size_t STACK_SIZE = 256 * 1024;
#ifdef __SANITIZE_ADDRESS__
static void *scheduler_fake_stack;
static const void *scheduler_stack_bottom;
static size_t scheduler_stack_size;
#endif

// Context switch (x86-64 SysV): save the callee-saved registers on the old stack,
// switch stacks, restore them from the new one. ~5 ns, against ~270 ns for glibc's
// swapcontext (which also saves the signal mask with a system call).
extern "C" void cudasim_switch(void **save_sp, void *load_sp);
extern "C" void cudasim_fiber_trampoline();
#if !defined(__x86_64__)
#error "gemmcheck cpu-sim: the fiber switch is written for x86-64"
#endif
asm(R"(
    .text
    .globl cudasim_switch
    .type cudasim_switch, @function
cudasim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cudasim_switch, .-cudasim_switch
    .globl cudasim_fiber_trampoline
    .type cudasim_fiber_trampoline, @function
cudasim_fiber_trampoline:
    call cudasim_fiber_main
    ud2
    .size cudasim_fiber_trampoline, .-cudasim_fiber_trampoline
)");

static void to_fiber(int t)
{
    Fiber &f = fibers[t];
    current = t;
    threadIdx = f.tid;
    report->cur_thread = (uint32_t)t;
    report->heartbeat = report->heartbeat + 1;
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_start_switch_fiber(&scheduler_fake_stack, f.stack, f.stack_size);
#endif
    cudasim_switch(&scheduler_sp, f.sp);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
    current = -1;
}

static void to_scheduler()
{
    Fiber &f = fibers[current];
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_start_switch_fiber(f.state == EXITED ? nullptr : &f.fake_stack,
                                   scheduler_stack_bottom, scheduler_stack_size);
#endif
    cudasim_switch(&f.sp, scheduler_sp);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(f.fake_stack, nullptr, nullptr);
#endif
}

extern "C" void cudasim_fiber_main()
{
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
#endif
    kernel_fn(kernel_pointers, kernel_ints);
    fibers[current].state = EXITED;
    to_scheduler();
    abort();  // an exited fiber is never resumed
}

extern "C" void cudasim_syncthreads(const char *file, int line)
{
    Fiber &f = fibers[current];
    f.state = AT_BARRIER;
    f.file = file;
    f.line = line;
    to_scheduler();
}

extern "C" long long cudasim_clock64(void) { return ++sim_clock; }

static void ensure_fibers(size_t n)
{
    while (fibers.size() < n)
    {
        Fiber f{};
        // One mapping per stack with a guard page below it: an overflow faults.
        size_t total = STACK_SIZE + 4096;
        char *base = (char *)mmap(nullptr, total, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED)
        {
            perror("cudasim: mmap of a fiber stack");
            _exit(70);
        }
        mprotect(base, 4096, PROT_NONE);
        f.stack = base + 4096;
        f.stack_size = STACK_SIZE;
        fibers.push_back(f);
    }
}

static void start_fiber(Fiber &f)
{
    uintptr_t top = ((uintptr_t)(f.stack + f.stack_size)) & ~(uintptr_t)15;
    void **sp = (void **)(top - 9 * sizeof(void *));
    for (int i = 0; i < 6; i++)
        sp[i] = nullptr;  // r15 r14 r13 r12 rbx rbp
    sp[6] = (void *)&cudasim_fiber_trampoline;
    f.sp = sp;
    f.state = RUNNABLE;
}

// ---------------------------------------------------------------------------
// Shared-memory tracking, driven by the -fsanitize=thread instrumentation of the
// kernel module. Per 2-byte granule of the shared arrays: the interval of the last
// write and its thread, the interval of the last reads and up to two reader threads.
// Intervals (one per barrier interval of one block) only grow, so nothing is reset.
// ---------------------------------------------------------------------------
struct Granule
{
    uint64_t write_interval, read_interval;
    uint16_t writer, reader, reader2, is_shared;
};
static uintptr_t shared_lo, shared_hi;  // span of the current module's shared arrays
static Granule *granules;
static size_t granules_size;
static uint64_t interval_counter;   // global, strictly increasing
static uint64_t block_first_interval;
static uint32_t block_interval;    // barrier intervals completed in this block
static uintptr_t module_base;
static const uint16_t NOBODY = 0xffff;

static void record(uint32_t kind, uintptr_t address, uint32_t other)
{
    report->counts[kind]++;
    if (report->nconflicts >= MAX_CONFLICTS)
        return;
    // Keep the first of each kind before filling up with more of one kind.
    uint32_t seen = 0;
    for (uint32_t i = 0; i < report->nconflicts; i++)
        seen += report->conflicts[i].kind == kind;
    if (seen >= 4)
        return;
    cs_conflict &c = report->conflicts[report->nconflicts++];
    c.kind = kind;
    c.interval = block_interval;
    c.thread_a = (uint32_t)current;
    c.thread_b = other;
    c.block[0] = blockIdx.x;
    c.block[1] = blockIdx.y;
    c.block[2] = blockIdx.z;
    c.address = address - module_base;
}

static inline void lockstep_yield()
{
    if (lockstep && current >= 0)
        to_scheduler();
}

static void track(uintptr_t a, size_t size, bool write)
{
    if (a - shared_lo >= shared_hi - shared_lo || current < 0)
        return;
    lockstep_yield();
    uint64_t now = interval_counter;
    uint16_t me = (uint16_t)current;
    size_t first = (a - shared_lo) >> 1, last = (a + size - 1 - shared_lo) >> 1;
    bool raw = false, war = false, waw = false, uninit = false;
    uint32_t other_raw = NOBODY, other_war = NOBODY, other_waw = NOBODY;
    for (size_t g = first; g <= last && g < granules_size; g++)
    {
        Granule &s = granules[g];
        if (!s.is_shared)
            continue;
        if (write)
        {
            if (s.write_interval == now && s.writer != me && !waw)
                waw = true, other_waw = s.writer;
            if (s.read_interval == now && !war)
            {
                if (s.reader != me)
                    war = true, other_war = s.reader;
                else if (s.reader2 != NOBODY)
                    war = true, other_war = s.reader2;
            }
            s.write_interval = now;
            s.writer = me;
        }
        else
        {
            if (s.write_interval < block_first_interval)
            {
                // Never written by this block: what the GPU leaves there is undefined;
                // make it poison so the value shows.
                uninit = true;
                memset((void *)(shared_lo + 2 * g), 0xff, 2);
            }
            else if (s.write_interval == now && s.writer != me && !raw)
                raw = true, other_raw = s.writer;
            if (s.read_interval != now)
                s.read_interval = now, s.reader = me, s.reader2 = NOBODY;
            else if (s.reader != me && s.reader2 == NOBODY)
                s.reader2 = me;
        }
    }
    if (raw)
        record(KIND_RAW, a, other_raw);
    if (war)
        record(KIND_WAR, a, other_war);
    if (waw)
        record(KIND_WAW, a, other_waw);
    if (uninit)
        record(KIND_UNINIT, a, NOBODY);
}

#define TSAN_SIZED(N)                                                                        \
    extern "C" void __tsan_read##N(void *p) { track((uintptr_t)p, N, false); }                \
    extern "C" void __tsan_write##N(void *p) { track((uintptr_t)p, N, true); }                \
    extern "C" void __tsan_unaligned_read##N(void *p) { track((uintptr_t)p, N, false); }      \
    extern "C" void __tsan_unaligned_write##N(void *p) { track((uintptr_t)p, N, true); }      \
    extern "C" void __tsan_volatile_read##N(void *p) { track((uintptr_t)p, N, false); }       \
    extern "C" void __tsan_volatile_write##N(void *p) { track((uintptr_t)p, N, true); }       \
    extern "C" void __tsan_unaligned_volatile_read##N(void *p) { track((uintptr_t)p, N, false); } \
    extern "C" void __tsan_unaligned_volatile_write##N(void *p) { track((uintptr_t)p, N, true); }
TSAN_SIZED(1)
TSAN_SIZED(2)
TSAN_SIZED(4)
TSAN_SIZED(8)
TSAN_SIZED(16)
extern "C" void __tsan_read_range(void *p, size_t n) { track((uintptr_t)p, n, false); }
extern "C" void __tsan_write_range(void *p, size_t n) { track((uintptr_t)p, n, true); }
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_init() {}
extern "C" void __tsan_vptr_update(void **, void *) {}
extern "C" void __tsan_vptr_read(void **) {}

static void set_shared_ranges(const cs_request &rq, uintptr_t base)
{
    module_base = base;
    if (rq.nranges == 0)
    {
        shared_lo = shared_hi = 0;
        return;
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < rq.nranges; i++)
    {
        lo = rq.range_start[i] < lo ? rq.range_start[i] : lo;
        hi = rq.range_start[i] + rq.range_size[i] > hi ? rq.range_start[i] + rq.range_size[i] : hi;
    }
    lo &= ~(uint64_t)1;
    hi = (hi + 1) & ~(uint64_t)1;
    size_t n = (hi - lo) / 2;
    if (granules)
        munmap(granules, granules_size * sizeof(Granule));
    granules = (Granule *)mmap(nullptr, n * sizeof(Granule), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    granules_size = n;
    for (uint32_t i = 0; i < rq.nranges; i++)
        for (uint64_t b = rq.range_start[i]; b < rq.range_start[i] + rq.range_size[i]; b += 2)
            granules[(b - lo) / 2].is_shared = 1;
    shared_lo = base + lo;
    shared_hi = base + hi;
}

// ---------------------------------------------------------------------------
// The scheduler
// ---------------------------------------------------------------------------
static uint64_t splitmix(uint64_t &s)
{
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void check_barrier(uint32_t n)
{
    // Every thread that did not exit is parked at a barrier. They must all be at the
    // same one, and none may have exited while others wait.
    cs_divergence d{};
    uint32_t waiting = 0;
    for (uint32_t t = 0; t < n; t++)
    {
        Fiber &f = fibers[t];
        if (f.state == EXITED)
        {
            if (d.exited++ == 0)
                d.first_exited = t;
            continue;
        }
        waiting++;
        const char *slash = strrchr(f.file, '/');
        char name[sizeof d.sites[0].file];
        snprintf(name, sizeof name, "%s", slash ? slash + 1 : f.file);
        uint32_t s = 0;
        while (s < d.nsites && !(d.sites[s].line == f.line && strcmp(d.sites[s].file, name) == 0))
            s++;
        if (s == d.nsites && s < MAX_SITES)
        {
            memcpy(d.sites[s].file, name, sizeof name);
            d.sites[s].line = f.line;
            d.sites[s].first_thread = t;
            d.nsites++;
        }
        if (s < MAX_SITES)
            d.sites[s].count++;
    }
    if (waiting == 0 || (d.nsites <= 1 && d.exited == 0))
        return;
    report->divergent++;
    if (report->ndivergent < MAX_DIVERGENT)
    {
        d.block[0] = blockIdx.x;
        d.block[1] = blockIdx.y;
        d.block[2] = blockIdx.z;
        d.interval = block_interval;
        report->divergences[report->ndivergent++] = d;
    }
}

static void run_block(uint32_t n, int schedule, uint64_t seed, uint64_t block_linear)
{
    ensure_fibers(n);
    uint32_t t = 0;
    for (uint32_t z = 0; z < blockDim.z; z++)
        for (uint32_t y = 0; y < blockDim.y; y++)
            for (uint32_t x = 0; x < blockDim.x; x++, t++)
            {
                fibers[t].tid = uint3{x, y, z};
                start_fiber(fibers[t]);
            }
    block_first_interval = ++interval_counter;
    block_interval = 0;
    std::vector<uint32_t> order(n);
    for (;;)
    {
        for (uint32_t i = 0; i < n; i++)
            order[i] = schedule == SCHED_REVERSE ? n - 1 - i : i;
        if (schedule == SCHED_SHUFFLE)
        {
            uint64_t s = seed * 0x100000001b3ull ^ (block_linear << 20) ^ block_interval;
            for (uint32_t i = n; i > 1; i--)
            {
                uint32_t j = (uint32_t)(splitmix(s) % i);
                uint32_t tmp = order[i - 1];
                order[i - 1] = order[j];
                order[j] = tmp;
            }
        }
        bool runnable = true;
        while (runnable)
        {
            runnable = false;
            for (uint32_t i = 0; i < n; i++)
                if (fibers[order[i]].state == RUNNABLE)
                {
                    to_fiber((int)order[i]);
                    runnable = runnable || fibers[order[i]].state == RUNNABLE;
                }
        }
        check_barrier(n);
        bool any = false;
        for (uint32_t i = 0; i < n; i++)
            if (fibers[i].state == AT_BARRIER)
                fibers[i].state = RUNNABLE, any = true;
        if (!any)
            break;
        interval_counter++;
        block_interval++;
    }
}

static void run_grid(const uint32_t grid[3], const uint32_t block[3], int schedule, uint64_t seed)
{
    gridDim = dim3(grid[0], grid[1], grid[2]);
    blockDim = dim3(block[0], block[1], block[2]);
    uint32_t n = block[0] * block[1] * block[2];
    lockstep = schedule == SCHED_LOCKSTEP;
    uint64_t linear = 0;
    for (uint32_t z = 0; z < grid[2]; z++)
        for (uint32_t y = 0; y < grid[1]; y++)
            for (uint32_t x = 0; x < grid[0]; x++, linear++)
            {
                blockIdx = uint3{x, y, z};
                report->cur_block[0] = x;
                report->cur_block[1] = y;
                report->cur_block[2] = z;
                run_block(n, schedule, seed, linear);
            }
    lockstep = false;
}

static void on_fault(int sig, siginfo_t *info, void *)
{
    report->signal = (uint32_t)sig;
    report->fault_address = (uint64_t)(uintptr_t)info->si_addr;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_fault_handlers()
{
    static char altstack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
        sigaction(sig, &sa, nullptr);
}

static void reset_report()
{
    uint64_t beat = report->heartbeat;
    memset((void *)report, 0, sizeof *report);
    report->heartbeat = beat;
    report->state = 1;
}

#ifndef CUDASIM_ASAN_RUNNER
// ---------------------------------------------------------------------------
// The worker: argv = socket fd, report memfd. Requests: cs_request + memfds.
// ---------------------------------------------------------------------------
#include <link.h>

struct Module { std::string *path; void *handle; const cudasim_kernel *kernels; int count; uintptr_t base; };

static std::vector<Module> modules;

static Module *module_for(const char *path, char *error, size_t error_size)
{
    for (Module &m : modules)
        if (*m.path == path)
            return &m;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
    {
        snprintf(error, error_size, "dlopen: %s", dlerror());
        return nullptr;
    }
    Module m{new std::string(path), h, (const cudasim_kernel *)dlsym(h, "cudasim_kernels"), 0, 0};
    const int *count = (const int *)dlsym(h, "cudasim_kernel_count");
    struct link_map *lm = nullptr;
    if (!m.kernels || !count || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0)
    {
        snprintf(error, error_size, "%s has no cudasim_kernels table", path);
        return nullptr;
    }
    m.count = *count;
    m.base = (uintptr_t)lm->l_addr;
    modules.push_back(m);
    return &modules.back();
}

int main(int argc, char **argv)
{
    if (argc != 3)
    {
        fprintf(stderr, "usage: %s SOCKET_FD REPORT_FD\n", argv[0]);
        return 2;
    }
    int sock = atoi(argv[1]);
    int report_fd = atoi(argv[2]);
    report = (cs_report *)mmap(nullptr, sizeof(cs_report), PROT_READ | PROT_WRITE, MAP_SHARED, report_fd, 0);
    if (report == MAP_FAILED)
    {
        perror("cudasim worker: mmap report");
        return 2;
    }
    install_fault_handlers();
    static cs_request rq;
    const std::string *loaded_ranges_for = nullptr;
    for (;;)
    {
        char control[CMSG_SPACE(sizeof(int) * MAX_POINTERS)];
        struct iovec iov = {&rq, sizeof rq};
        struct msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (got <= 0)
            return 0;  // the parent closed the socket: done
        int fds[MAX_POINTERS];
        int nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            {
                nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                memcpy(fds, CMSG_DATA(c), sizeof(int) * nfds);
            }
        char error[512] = "";
        int status = 0;
        reset_report();
        Module *m = module_for(rq.module, error, sizeof error);
        std::vector<std::pair<void *, size_t>> maps;
        if (!m)
            status = 1;
        else if (rq.kernel < 0 || rq.kernel >= m->count || nfds != rq.npointers)
        {
            snprintf(error, sizeof error, "bad request: kernel %d of %d, %d fds for %d pointers",
                     rq.kernel, m->count, nfds, rq.npointers);
            status = 1;
        }
        else
        {
            for (int i = 0; i < rq.npointers; i++)
            {
                // Map the whole buffer up to the end of the view; the pointer is its offset.
                size_t length = rq.pointer_offset[i] + rq.pointer_length[i];
                void *p = mmap(nullptr, length ? length : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
                if (p == MAP_FAILED)
                {
                    snprintf(error, sizeof error, "mmap of buffer %d (%zu bytes) failed", i, length);
                    status = 1;
                    break;
                }
                maps.emplace_back(p, length ? length : 1);
                kernel_pointers[i] = (char *)p + rq.pointer_offset[i];
            }
            if (status == 0)
            {
                if (loaded_ranges_for != m->path)
                    set_shared_ranges(rq, m->base);
                loaded_ranges_for = m->path;
                if (!rq.track)
                    shared_lo = shared_hi = 0, loaded_ranges_for = nullptr;
                memcpy(kernel_ints, rq.ints, sizeof kernel_ints);
                kernel_fn = m->kernels[rq.kernel].launch;
                run_grid(rq.grid, rq.block, rq.schedule, rq.seed);
            }
        }
        for (auto &mp : maps)
            munmap(mp.first, mp.second);
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        report->state = 2;
        char reply[520];
        reply[0] = (char)status;
        snprintf(reply + 1, sizeof reply - 1, "%s", error);
        if (send(sock, reply, 1 + strlen(reply + 1), 0) < 0)
            return 0;
    }
}

#else
// ---------------------------------------------------------------------------
// The AddressSanitizer runner: one launch on exact-size heap buffers.
// argv: kernel-index gx gy gz bx by bz nints ints... npointers (path bytes)...
// Writes every buffer back to its file after the launch.
// ---------------------------------------------------------------------------
extern "C" const cudasim_kernel cudasim_kernels[];
extern "C" const int cudasim_kernel_count;

int main(int argc, char **argv)
{
    int a = 1;
    auto next = [&]() -> const char * {
        if (a >= argc)
        {
            fprintf(stderr, "cudasim asan runner: too few arguments\n");
            exit(2);
        }
        return argv[a++];
    };
    int kernel = atoi(next());
    uint32_t grid[3], block[3];
    for (auto &g : grid)
        g = (uint32_t)atol(next());
    for (auto &b : block)
        b = (uint32_t)atol(next());
    int nints = atoi(next());
    for (int i = 0; i < nints; i++)
        kernel_ints[i] = atoi(next());
    int np = atoi(next());
    std::vector<const char *> paths;
    std::vector<size_t> sizes;
    for (int i = 0; i < np; i++)
    {
        paths.push_back(next());
        sizes.push_back((size_t)atoll(next()));
        char *p = (char *)malloc(sizes.back() ? sizes.back() : 1);
        FILE *f = fopen(paths.back(), "rb");
        if (!f || fread(p, 1, sizes.back(), f) != sizes.back())
        {
            fprintf(stderr, "cudasim asan runner: cannot read %s\n", paths.back());
            return 2;
        }
        fclose(f);
        kernel_pointers[i] = p;
        fprintf(stderr, "cudasim-buffer %d %p %zu\n", i, (void *)p, sizes.back());
    }
    if (kernel < 0 || kernel >= cudasim_kernel_count)
        return 2;
    kernel_fn = cudasim_kernels[kernel].launch;
    run_grid(grid, block, SCHED_FORWARD, 0);
    for (int i = 0; i < np; i++)
    {
        FILE *f = fopen(paths[i], "wb");
        fwrite(kernel_pointers[i], 1, sizes[i], f);
        fclose(f);
    }
    fprintf(stderr, "cudasim-done\n");
    return 0;
}
#endif
