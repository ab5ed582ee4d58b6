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
// Stores and atomics into the kernel's buffers are tracked per block within a launch: two
// blocks writing one address, not both atomically, is a global-memory race (track_global).
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
enum { MAX_POINTERS = 16, MAX_ARGUMENT_BYTES = 256, MAX_RANGES = 1024, MAX_CONFLICTS = 16, MAX_DIVERGENT = 8, MAX_SITES = 4,
       MAX_GLOBAL_RACES = 8 };
// A global-memory race: what the earlier block did to the address, and what the later one did.
enum { GLOBAL_STORE = 1, GLOBAL_ATOMIC = 2 };
// What a cs_divergence records: threads at different __syncthreads, or a warp-synchronous call
// (shuffle, vote, match, reduction, __syncwarp) whose lanes did not meet as its masks say.
enum { DIVERGE_BARRIER = 0, DIVERGE_WARP_MISSING = 1, DIVERGE_WARP_MASK = 2, DIVERGE_WARP_SOURCE = 3,
       DIVERGE_WARP_MASKS_DIFFER = 4 };
enum { MESSAGE_SIZE = 256 };

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
    uint32_t nsites, exited, first_exited, what;  // what: DIVERGE_*
    cs_site sites[MAX_SITES];
    // A warp-synchronous call (what != DIVERGE_BARRIER): its warp of the block, the mask the
    // lane that opened it gave, the lanes at fault (WARP_MASK: callers outside their own mask;
    // WARP_MASKS_DIFFER: callers with another mask; WARP_MISSING: lanes named that
    // never came; WARP_SOURCE: lanes whose shuffle read a lane that did not take part) and the
    // call (WARP_* below).
    uint32_t warp, mask, lanes, op;
};
struct cs_global_race
{
    uint32_t earlier, later;        // GLOBAL_STORE / GLOBAL_ATOMIC
    uint32_t earlier_block[3], later_block[3];
    uint32_t buffer, pad;           // kernel pointer index
    int64_t byte_offset;            // from the kernel pointer (negative: in the guard before it)
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
    char message[MESSAGE_SIZE];  // why the kernel was stopped, when the runtime stopped it
    uint64_t global_races;       // addresses of kernel buffers two blocks raced on
    uint32_t nglobal, pad;
    cs_global_race global[MAX_GLOBAL_RACES];
    uint64_t bad_warp_calls;     // warp-synchronous calls whose lanes did not meet as their masks say
};
struct cs_request
{
    char module[1024];
    int32_t kernel, npointers, nbytes, schedule;  // nbytes: of arguments, used of MAX_ARGUMENT_BYTES
    uint64_t seed;
    uint32_t grid[3], block[3];
    uint64_t arguments[MAX_ARGUMENT_BYTES / 8];  // by-value arguments, each in its declared type's bytes
    uint64_t pointer_offset[MAX_POINTERS];  // into the memfd sent with the request, in order
    uint64_t pointer_length[MAX_POINTERS];  // bytes to map
    uint32_t nranges, track;  // track: 0 runs without shared- and global-memory tracking (faster)
    uint64_t range_start[MAX_RANGES], range_size[MAX_RANGES];  // shared arrays, module-relative
    uint64_t pointer_host_base[MAX_POINTERS];  // each buffer's first byte in the harness's process
    uint32_t pointer_arrays, pad;              // bit i: buffer i is an array of pointers (relocated)
};

// ---------------------------------------------------------------------------
// CUDA built-ins and state of the block being run
// ---------------------------------------------------------------------------
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

static cs_report scratch_report;
static cs_report *report = &scratch_report;

enum { RUNNABLE, AT_BARRIER, EXITED, AT_WARP };
struct Fiber
{
    void *sp;
    char *stack;
    size_t stack_size;
    int state;
    const char *file;
    int line;
    uint3 tid;
    uint64_t warp_value, warp_result;  // a warp-synchronous call: this lane's operand, its result
    int warp_arg, warp_width;
    uint32_t warp_mask;                // the mask this lane gave it
#ifdef __SANITIZE_ADDRESS__
    void *fake_stack;
#endif
};

static std::vector<Fiber> fibers;
static int current = -1;                 // fiber running, -1: the scheduler
static void *scheduler_sp;
static cudasim_launcher kernel_fn;
static void *kernel_pointers[MAX_POINTERS];
alignas(16) static unsigned char kernel_arguments[MAX_ARGUMENT_BYTES];
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
    kernel_fn(kernel_pointers, kernel_arguments);
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

// cuda::barrier::arrive_and_wait (include/cuda/barrier): the block's barrier when the barrier
// was initialised for the whole block; anything else is not modelled and stops the kernel.
extern "C" void cudasim_block_barrier(long long expected, const char *file, int line)
{
    uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
    if (expected != (long long)threads)
    {
        const char *slash = strrchr(file, '/');
        snprintf(report->message, sizeof report->message,
                 "not modelled: a cuda::barrier for %lld threads in a block of %u (%s:%d); cpu-sim "
                 "models block-wide barriers only",
                 expected, threads, slash ? slash + 1 : file, line);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    cudasim_syncthreads(file, line);
}

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
// kernel module. Per byte of the shared arrays (a granule: one byte, so threads writing
// neighbouring bytes, as tiles of int8 or 8-bit floats do, are not taken for one address): the
// interval of the last write and its thread, the interval of the last reads and up to two
// reader threads.
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

// ---------------------------------------------------------------------------
// Global-memory tracking: within one launch, per byte of each kernel buffer, the last block
// that stored there plainly and the last two distinct blocks that updated it atomically. CUDA
// orders nothing between the blocks of one launch, so a plain store by one block and a store
// or an atomic by another to the same address is a race whatever order they ran in here (and
// the order the schedule happened to pick may even give the right result). Atomics against
// atomics are not: each is one read-modify-write, and a split-K sum into a zeroed C is built
// from them. Two atomic blocks are kept so that a store finds another block's atomic whichever
// ran last: blocks 0 and 1 adding, then block 1 storing, races with block 0's add (with one
// kept, block 1's own add hid it in that order only). A store by another block is found
// whatever came between: a second block's store would have raced with it already. Writes
// only: a load passes by untouched, a store outside the kernel's
// buffers costs one comparison, a store into them one shadow update.
// ---------------------------------------------------------------------------
struct GlobalGranule
{
    // linear block index + 1; 0: no block this launch. atomic_other: a block other than
    // atomic_by that updated it atomically before atomic_by did.
    uint32_t stored_by, atomic_by, atomic_other;
};
struct GlobalBuffer
{
    uintptr_t lo, hi, pointer;      // the mapping, and the kernel's pointer into it
    GlobalGranule *granules;
    size_t size;
};
static GlobalBuffer global_buffers[MAX_POINTERS];
static int nglobal_buffers;
static uintptr_t global_lo, global_hi;  // span of the tracked buffers: one comparison rejects the rest
static uint32_t block_tag;              // the running block's linear index + 1

// Track the buffers of one launch (their shadows start empty: fresh zero pages).
static void track_global_buffers(const std::vector<std::pair<void *, size_t>> &maps, void *const *pointers)
{
    global_lo = UINTPTR_MAX, global_hi = 0;
    nglobal_buffers = 0;
    for (size_t i = 0; i < maps.size() && i < MAX_POINTERS; i++)
    {
        GlobalBuffer &b = global_buffers[nglobal_buffers];
        b.lo = (uintptr_t)maps[i].first;
        b.hi = b.lo + maps[i].second;
        b.pointer = (uintptr_t)pointers[i];
        b.size = maps[i].second;
        void *shadow = mmap(nullptr, b.size * sizeof(GlobalGranule), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (shadow == MAP_FAILED)
            continue;  // untracked: a race there goes unseen, nothing else changes
        b.granules = (GlobalGranule *)shadow;
        global_lo = b.lo < global_lo ? b.lo : global_lo;
        global_hi = b.hi > global_hi ? b.hi : global_hi;
        nglobal_buffers++;
    }
    if (nglobal_buffers == 0)
        global_lo = global_hi = 0;
}

static void untrack_global_buffers()
{
    for (int i = 0; i < nglobal_buffers; i++)
        munmap(global_buffers[i].granules, global_buffers[i].size * sizeof(GlobalGranule));
    nglobal_buffers = 0;
    global_lo = global_hi = 0;
}

static void block_of_tag(uint32_t tag, uint32_t out[3])
{
    uint64_t linear = tag - 1;
    out[0] = (uint32_t)(linear % gridDim.x);
    out[1] = (uint32_t)(linear / gridDim.x % gridDim.y);
    out[2] = (uint32_t)(linear / ((uint64_t)gridDim.x * gridDim.y));
}

static void record_global(int buffer, uintptr_t a, uint32_t earlier, uint32_t earlier_tag, uint32_t later)
{
    report->global_races++;
    if (report->nglobal >= MAX_GLOBAL_RACES)
        return;
    cs_global_race &r = report->global[report->nglobal++];
    r.earlier = earlier;
    r.later = later;
    block_of_tag(earlier_tag, r.earlier_block);
    block_of_tag(block_tag, r.later_block);
    r.buffer = (uint32_t)buffer;
    r.byte_offset = (int64_t)(a - global_buffers[buffer].pointer);
}

static void track_global(uintptr_t a, size_t size, uint32_t what)
{
    if (a - global_lo >= global_hi - global_lo || current < 0)
        return;
    for (int i = 0; i < nglobal_buffers; i++)
    {
        GlobalBuffer &b = global_buffers[i];
        if (a - b.lo >= b.hi - b.lo)
            continue;
        bool raced = false;
        uint32_t other = 0, kind = 0;
        for (size_t g = a - b.lo; g <= a + size - 1 - b.lo && g < b.size; g++)
        {
            GlobalGranule &s = b.granules[g];
            uint32_t other_atomic = s.atomic_by != block_tag ? s.atomic_by : s.atomic_other;
            if (!raced && s.stored_by && s.stored_by != block_tag)
                raced = true, other = s.stored_by, kind = GLOBAL_STORE;
            else if (!raced && what == GLOBAL_STORE && other_atomic)
                raced = true, other = other_atomic, kind = GLOBAL_ATOMIC;
            if (what == GLOBAL_STORE)
                s.stored_by = block_tag;
            else if (s.atomic_by != block_tag)
                s.atomic_other = s.atomic_by, s.atomic_by = block_tag;
        }
        if (raced)
            record_global(i, a, kind, other, what);
        return;
    }
}

static void track(uintptr_t a, size_t size, bool write)
{
    if (a - shared_lo >= shared_hi - shared_lo || current < 0)
    {
        if (write)
            track_global(a, size, GLOBAL_STORE);
        return;
    }
    lockstep_yield();
    uint64_t now = interval_counter;
    uint16_t me = (uint16_t)current;
    size_t first = a - shared_lo, last = a + size - 1 - shared_lo;
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
                *(unsigned char *)(shared_lo + g) = 0xff;
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

// ---------------------------------------------------------------------------
// Misaligned accesses. The kernel module is built with -fsanitize=alignment for its checks
// only: a load or store through a pointer not aligned to its type (a float4 at an address
// that is not a multiple of 16) calls this handler, defined here. The GPU stops such a
// kernel with "misaligned address"; the simulator stops it as a crash that says so.
// ---------------------------------------------------------------------------
struct ubsan_location { const char *file; uint32_t line, column; };
struct ubsan_type { uint16_t kind, info; char name[1]; };
struct ubsan_mismatch { ubsan_location location; const ubsan_type *type; unsigned char log_alignment, check_kind; };

[[noreturn]] static void stop_misaligned(uintptr_t address, size_t alignment, const char *what, const char *file,
                                         unsigned line)
{
    const char *slash = file ? strrchr(file, '/') : nullptr;
    snprintf(report->message, sizeof report->message,
             "misaligned address: %s at %#lx, which is not a multiple of %zu (%s:%u); the GPU stops "
             "the kernel with 'misaligned address'",
             what, (unsigned long)address, alignment, slash ? slash + 1 : (file ? file : "?"), line);
    report->signal = SIGBUS;
    report->fault_address = address;
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
    _exit(71);
}

extern "C" void __ubsan_handle_type_mismatch_v1(ubsan_mismatch *data, uintptr_t pointer)
{
    size_t alignment = (size_t)1 << data->log_alignment;
    if (pointer == 0 || (pointer & (alignment - 1)) == 0)
        return;  // a null pointer: the fault that follows names it
    static const char *const kinds[] = {"load of", "store to", "reference to", "member access in"};
    char what[160];
    snprintf(what, sizeof what, "%s %s", data->check_kind < 4 ? kinds[data->check_kind] : "use of",
             data->type ? data->type->name : "a value");
    stop_misaligned(pointer, alignment, what, data->location.file, data->location.line);
}
extern "C" void __ubsan_handle_type_mismatch_v1_abort(ubsan_mismatch *data, uintptr_t pointer)
{
    __ubsan_handle_type_mismatch_v1(data, pointer);
}

// ---------------------------------------------------------------------------
// Atomics: the read-modify-write is done by the caller (device_functions.h), uninstrumented,
// with no switch to another fiber in between: atomic with respect to every thread. Their
// order is the schedule's: threads in schedule order, blocks in schedule order, and under
// `lockstep` every atomic is a turn, so the threads' atomics interleave.
// In shared memory an atomic counts as a write of the thread (a plain access of another
// thread in the same barrier interval conflicts with it); atomics never conflict with each
// other. An atomic on shared memory no thread of the block has written reads poison.
// ---------------------------------------------------------------------------
extern "C" void cudasim_atomic(void *address, unsigned long size, const char *file, int line)
{
    uintptr_t a = (uintptr_t)address;
    if (a & (size - 1))
        stop_misaligned(a, size, "atomic operation", file, (unsigned)line);
    lockstep_yield();
    track_global(a, size, GLOBAL_ATOMIC);
    if (a - shared_lo >= shared_hi - shared_lo || current < 0)
        return;
    uint64_t now = interval_counter;
    bool uninit = false;
    for (size_t g = a - shared_lo; g <= a + size - 1 - shared_lo && g < granules_size; g++)
    {
        Granule &s = granules[g];
        if (!s.is_shared)
            continue;
        if (s.write_interval < block_first_interval)
        {
            uninit = true;
            *(unsigned char *)(shared_lo + g) = 0xff;
        }
        s.write_interval = now;
        s.writer = (uint16_t)current;
    }
    if (uninit)
        record(KIND_UNINIT, a, NOBODY);
}

// ---------------------------------------------------------------------------
// Atomic builtins and fences in kernel code. The thread instrumentation turns every
// __atomic_* / __sync_* builtin of the module (the prelude's __threadfence, and whatever else
// uses them) into a call of one of these entry points: the list is the compiler's own, every
// __tsan_ name g++ can emit (its cc1plus holds each one; tests/test_cpu_sim_build.py checks the
// worker against the compiler on the machine). Fibers switch only at the runtime's calls, so
// each operation is one uninterrupted read-modify-write, seen by the tracking as CUDA's atomics
// are (cudasim_atomic: alignment, a lockstep turn, a write of the thread); an atomic load is a
// turn and an alignment check, not a write. Memory orders are moot with one fiber running.
// ---------------------------------------------------------------------------
static void tsan_atomic(const volatile void *address, size_t size, bool writes)
{
    if (writes)
        return cudasim_atomic((void *)address, size, nullptr, 0);
    uintptr_t a = (uintptr_t)address;
    if (a & (size - 1))
        stop_misaligned(a, size, "atomic load", nullptr, 0);
    lockstep_yield();
}

template <typename T> static bool tsan_compare_exchange(volatile T *a, T *expected, T desired)
{
    tsan_atomic(a, sizeof(T), true);
    T old = *a;
    bool equal = old == *expected;
    if (equal)
        *a = desired;
    else
        *expected = old;
    return equal;
}

#define TSAN_RMW(BITS, T, OP, NEW)                                                                \
    extern "C" T __tsan_atomic##BITS##_##OP(volatile T *a, T v, int)                              \
    {                                                                                             \
        tsan_atomic(a, sizeof(T), true);                                                          \
        T old = *a;                                                                               \
        *a = (T)(NEW);                                                                            \
        return old;                                                                               \
    }
#define TSAN_ATOMIC(BITS, T)                                                                      \
    extern "C" T __tsan_atomic##BITS##_load(const volatile T *a, int)                             \
    {                                                                                             \
        tsan_atomic(a, sizeof(T), false);                                                         \
        return *a;                                                                                \
    }                                                                                             \
    extern "C" void __tsan_atomic##BITS##_store(volatile T *a, T v, int)                          \
    {                                                                                             \
        tsan_atomic(a, sizeof(T), true);                                                          \
        *a = v;                                                                                   \
    }                                                                                             \
    TSAN_RMW(BITS, T, exchange, v)                                                                \
    TSAN_RMW(BITS, T, fetch_add, old + v)                                                         \
    TSAN_RMW(BITS, T, fetch_sub, old - v)                                                         \
    TSAN_RMW(BITS, T, fetch_and, old & v)                                                         \
    TSAN_RMW(BITS, T, fetch_or, old | v)                                                          \
    TSAN_RMW(BITS, T, fetch_xor, old ^ v)                                                         \
    TSAN_RMW(BITS, T, fetch_nand, ~(old & v))                                                     \
    extern "C" bool __tsan_atomic##BITS##_compare_exchange_strong(volatile T *a, T *expected, T v, int, int) \
    {                                                                                             \
        return tsan_compare_exchange(a, expected, v);                                             \
    }                                                                                             \
    extern "C" bool __tsan_atomic##BITS##_compare_exchange_weak(volatile T *a, T *expected, T v, int, int) \
    {                                                                                             \
        return tsan_compare_exchange(a, expected, v);                                             \
    }
TSAN_ATOMIC(8, uint8_t)
TSAN_ATOMIC(16, uint16_t)
TSAN_ATOMIC(32, uint32_t)
TSAN_ATOMIC(64, uint64_t)
TSAN_ATOMIC(128, unsigned __int128)
#undef TSAN_ATOMIC
#undef TSAN_RMW
extern "C" void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
extern "C" void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------
// Warp-synchronous calls (shuffles, votes, matches, reductions, __syncwarp). Lane = linear
// thread index % 32. A lane's call deposits its operand and parks the lane (AT_WARP) in the
// pending call of its warp to the same function whose lanes its mask overlaps, or a new one
// (lanes of one warp may call in disjoint groups, a tile's each). A call completes when every
// lane its masks name has arrived, lanes that exited or that the block does not have excused
// (CUDA excuses exited threads). Then every arrived lane gets its result at once and runs on.
// What CUDA leaves undefined is reported naming the lanes (cs_divergence.lanes; one record per
// warp, call site and kind, however many calls the schedule split its lanes into):
//  - WARP_MASK, when it completes: lanes that called with a mask leaving themselves out;
//  - WARP_MASKS_DIFFER, when it completes: lanes that called with another mask than the lane
//    that opened it;
//  - WARP_SOURCE, when it completes: lanes whose shuffle read a lane that did not take part;
//  - WARP_MISSING, when nothing can run and it is still incomplete: lanes its masks name that
//    never came (at a barrier, at another call); the lanes that came are then released with
//    what they can get.
// ---------------------------------------------------------------------------
enum { WARP_SHFL_IDX, WARP_SHFL_UP, WARP_SHFL_DOWN, WARP_SHFL_XOR, WARP_BALLOT, WARP_ALL, WARP_ANY, WARP_SYNC,
       WARP_MATCH_ANY, WARP_MATCH_ALL, WARP_REDUCE_ADD, WARP_REDUCE_MIN, WARP_REDUCE_MAX, WARP_REDUCE_AND,
       WARP_REDUCE_OR, WARP_REDUCE_XOR };
struct WarpCall
{
    bool pending;
    int op;
    uint32_t warp;
    uint32_t declared;   // the mask the lane that opened the call gave
    uint32_t mask;       // every lane some caller's mask names, and the callers
    uint32_t arrived;
    uint32_t outside;    // callers not in their own mask
    uint32_t disagree;   // callers whose mask differs from the opener's
    const char *file;
    int line;
};
static std::vector<WarpCall> warp_calls;  // the block's calls; a slot is reused once its call completed
static bool warp_released;                // a completed call made parked lanes runnable
static uint32_t block_threads;

static uint32_t lanes_of(uint32_t warp)
{
    uint32_t left = block_threads - 32 * warp;
    return left >= 32 ? 0xffffffffu : (1u << left) - 1;
}

static uint32_t exited_lanes(uint32_t warp)
{
    uint32_t out = 0, lanes = lanes_of(warp);
    for (uint32_t l = 0; l < 32; l++)
        if ((lanes >> l & 1) && fibers[32 * warp + l].state == EXITED)
            out |= 1u << l;
    return out;
}

static void report_warp(uint32_t what, const WarpCall &c, uint32_t lanes)
{
    report->bad_warp_calls++;
    uint32_t warp = c.warp;
    // The lanes of one warp at one call site may meet in several calls (as the schedule brings
    // them): one record names them all.
    const char *slash = c.file ? strrchr(c.file, '/') : nullptr;
    const char *file = slash ? slash + 1 : (c.file ? c.file : "?");
    for (uint32_t i = 0; i < report->ndivergent; i++)
    {
        cs_divergence &o = report->divergences[i];
        if (o.what == what && o.warp == warp && o.op == (uint32_t)c.op && o.interval == block_interval &&
            o.block[0] == blockIdx.x && o.block[1] == blockIdx.y && o.block[2] == blockIdx.z && o.nsites &&
            o.sites[0].line == c.line && strncmp(o.sites[0].file, file, sizeof o.sites[0].file - 1) == 0)
        {
            o.lanes |= lanes;
            return;
        }
    }
    if (report->ndivergent >= MAX_DIVERGENT)
        return;
    cs_divergence d{};
    d.block[0] = blockIdx.x;
    d.block[1] = blockIdx.y;
    d.block[2] = blockIdx.z;
    d.interval = block_interval;
    d.what = what;
    d.warp = warp;
    d.mask = c.declared;
    d.lanes = lanes;
    d.op = (uint32_t)c.op;
    auto site = [&](const char *file, int line, uint32_t thread) {
        const char *slash = file ? strrchr(file, '/') : nullptr;
        char name[sizeof d.sites[0].file];
        snprintf(name, sizeof name, "%s", slash ? slash + 1 : (file ? file : "?"));
        uint32_t s = 0;
        while (s < d.nsites && !(d.sites[s].line == line && strcmp(d.sites[s].file, name) == 0))
            s++;
        if (s == d.nsites && s < MAX_SITES)
        {
            memcpy(d.sites[s].file, name, sizeof name);
            d.sites[s].line = line;
            d.sites[s].first_thread = thread;
            d.nsites++;
        }
        if (s < MAX_SITES)
            d.sites[s].count++;
    };
    for (uint32_t l = 0; l < 32; l++)
        if (c.arrived >> l & 1)
            site(c.file, c.line, 32 * warp + l);
    // Where the lanes the call waited for are: at a barrier, still elsewhere, or exited.
    if (what == DIVERGE_WARP_MISSING)
        for (uint32_t l = 0; l < 32; l++)
            if (lanes >> l & 1)
            {
                Fiber &f = fibers[32 * warp + l];
                if (f.state == EXITED)
                {
                    if (d.exited++ == 0)
                        d.first_exited = 32 * warp + l;
                }
                else
                    site(f.file, f.line, 32 * warp + l);
            }
    report->divergences[report->ndivergent++] = d;
}

static bool warp_call_complete(const WarpCall &c)
{
    uint32_t needed = c.mask & lanes_of(c.warp) & ~exited_lanes(c.warp);
    return (c.arrived & needed) == needed;
}

static void complete_warp_call(WarpCall &c)
{
    uint32_t warp = c.warp;
    uint64_t value[32];
    for (uint32_t l = 0; l < 32; l++)
        value[l] = (c.arrived >> l & 1) ? fibers[32 * warp + l].warp_value : 0;
    uint32_t voted = 0, count = 0;
    uint64_t sum = 0, all_and = 0xffffffffu, all_or = 0, all_xor = 0;
    bool same = true;
    int32_t smin = INT32_MAX, smax = INT32_MIN;
    uint32_t umin = UINT32_MAX, umax = 0;
    for (uint32_t l = 0; l < 32; l++)
    {
        if (!(c.arrived >> l & 1))
            continue;
        uint32_t v32 = (uint32_t)value[l];
        voted |= value[l] ? 1u << l : 0;
        same = same && (count == 0 || value[l] == value[__builtin_ctz(c.arrived)]);
        count++;
        sum += v32, all_and &= v32, all_or |= v32, all_xor ^= v32;
        smin = (int32_t)v32 < smin ? (int32_t)v32 : smin;
        smax = (int32_t)v32 > smax ? (int32_t)v32 : smax;
        umin = v32 < umin ? v32 : umin;
        umax = v32 > umax ? v32 : umax;
    }
    uint32_t bad_source = 0;
    for (uint32_t l = 0; l < 32; l++)
    {
        if (!(c.arrived >> l & 1))
            continue;
        Fiber &f = fibers[32 * warp + l];
        uint32_t width = (uint32_t)f.warp_width;
        if (width == 0 || width > 32 || (width & (width - 1)))
            width = 32;
        uint32_t segment = l & ~(width - 1), source = l;
        bool is_signed = f.warp_arg != 0;
        uint64_t result = 0;
        switch (c.op)
        {
        case WARP_SHFL_IDX: source = segment + ((uint32_t)f.warp_arg & (width - 1)); break;
        case WARP_SHFL_UP: source = l - (uint32_t)f.warp_arg >= segment && (uint32_t)f.warp_arg <= l ? l - (uint32_t)f.warp_arg : l; break;
        case WARP_SHFL_DOWN: source = l + (uint32_t)f.warp_arg < segment + width ? l + (uint32_t)f.warp_arg : l; break;
        case WARP_SHFL_XOR: source = (l ^ (uint32_t)f.warp_arg) < segment + width ? l ^ (uint32_t)f.warp_arg : l; break;
        case WARP_BALLOT: result = voted & c.mask; break;
        case WARP_ALL: result = (voted & c.arrived) == c.arrived; break;
        case WARP_ANY: result = voted != 0; break;
        case WARP_MATCH_ANY:
            for (uint32_t m = 0; m < 32; m++)
                if ((c.arrived >> m & 1) && value[m] == value[l])
                    result |= 1ull << m;
            break;
        case WARP_MATCH_ALL: result = same ? f.warp_mask : 0; break;
        case WARP_REDUCE_ADD: result = (uint32_t)sum; break;
        case WARP_REDUCE_MIN: result = is_signed ? (uint32_t)smin : umin; break;
        case WARP_REDUCE_MAX: result = is_signed ? (uint32_t)smax : umax; break;
        case WARP_REDUCE_AND: result = all_and; break;
        case WARP_REDUCE_OR: result = all_or; break;
        case WARP_REDUCE_XOR: result = all_xor; break;
        default: break;
        }
        if (c.op <= WARP_SHFL_XOR)
        {
            if (source < 32 && (c.arrived >> source & 1))
                result = value[source];
            else
            {
                // The GPU gives an undefined value: reading a lane that did not take part.
                bad_source |= 1u << l;
                result = value[l];
            }
        }
        f.warp_result = result;
        if (f.state == AT_WARP)
            f.state = RUNNABLE;
    }
    if (c.outside)
        report_warp(DIVERGE_WARP_MASK, c, c.outside);
    if (c.disagree)
        report_warp(DIVERGE_WARP_MASKS_DIFFER, c, c.disagree);
    if (bad_source)
        report_warp(DIVERGE_WARP_SOURCE, c, bad_source);
    c.pending = false;
    warp_released = true;
}

extern "C" unsigned long long cudasim_warp(int op, unsigned mask, unsigned long long value, int arg, int width,
                                           const char *file, int line)
{
    uint32_t t = (uint32_t)current, warp = t / 32, lane = t % 32, me = 1u << lane;
    Fiber &f = fibers[t];
    f.warp_value = value;
    f.warp_arg = arg;
    f.warp_width = width;
    f.warp_mask = mask;
    // Join the pending call of this warp to the same function whose lanes this call's mask (and
    // its caller) overlaps. A lane at another function never meets it: the call waits for it.
    WarpCall *c = nullptr;
    for (WarpCall &p : warp_calls)
        if (p.pending && p.warp == warp && p.op == op && (p.mask & (mask | me)))
        {
            c = &p;
            break;
        }
    if (c == nullptr)
    {
        for (WarpCall &p : warp_calls)
            if (!p.pending)
            {
                c = &p;
                break;
            }
        if (c == nullptr)
            c = &warp_calls.emplace_back();
        *c = WarpCall{true, op, warp, mask, 0, 0, 0, 0, file, line};
    }
    else if (c->declared != mask)
        c->disagree |= me;
    if (!(mask & me))
        c->outside |= me;
    c->mask |= mask | me;
    c->arrived |= me;
    f.state = AT_WARP;
    f.file = file;
    f.line = line;
    if (warp_call_complete(*c))
        complete_warp_call(*c);
    else
        to_scheduler();  // resumed when the call completes
    return fibers[t].warp_result;
}

extern "C" unsigned cudasim_activemask(void)
{
    uint32_t warp = (uint32_t)current / 32;
    return lanes_of(warp) & ~exited_lanes(warp);
}

// Called when no fiber of the block can run: complete the calls that exits made complete,
// report the others (lanes named in the mask never came) and release their lanes.
static bool settle_warp_calls()
{
    bool released = false;
    for (size_t i = 0; i < warp_calls.size(); i++)
    {
        WarpCall &c = warp_calls[i];
        if (!c.pending)
            continue;
        if (!warp_call_complete(c))
            report_warp(DIVERGE_WARP_MISSING, c,
                        c.mask & lanes_of(c.warp) & ~exited_lanes(c.warp) & ~c.arrived);
        complete_warp_call(c);
        released = true;
    }
    return released;
}

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
    size_t n = hi - lo;
    if (granules)
        munmap(granules, granules_size * sizeof(Granule));
    granules = (Granule *)mmap(nullptr, n * sizeof(Granule), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    granules_size = n;
    for (uint32_t i = 0; i < rq.nranges; i++)
        for (uint64_t b = rq.range_start[i]; b < rq.range_start[i] + rq.range_size[i]; b++)
            granules[b - lo].is_shared = 1;
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
    block_threads = n;
    warp_calls.clear();
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
            warp_released = false;
            for (uint32_t i = 0; i < n; i++)
                if (fibers[order[i]].state == RUNNABLE)
                {
                    to_fiber((int)order[i]);
                    runnable = runnable || fibers[order[i]].state == RUNNABLE;
                }
            // Lanes a warp-synchronous call released; then calls that can never complete.
            runnable = runnable || warp_released || settle_warp_calls();
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
    // Blocks run one after another, in the schedule's order too: what blocks share through
    // global memory (atomics, a split-K sum) is combined in a different order per schedule.
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    std::vector<uint64_t> order;
    if (schedule == SCHED_SHUFFLE && blocks > 1)
    {
        order.resize(blocks);
        for (uint64_t i = 0; i < blocks; i++)
            order[i] = i;
        uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
        for (uint64_t i = blocks; i > 1; i--)
        {
            uint64_t j = splitmix(s) % i;
            uint64_t tmp = order[i - 1];
            order[i - 1] = order[j];
            order[j] = tmp;
        }
    }
    for (uint64_t i = 0; i < blocks; i++)
    {
        uint64_t linear = schedule == SCHED_REVERSE ? blocks - 1 - i : (order.empty() ? i : order[i]);
        uint32_t x = (uint32_t)(linear % grid[0]), y = (uint32_t)(linear / grid[0] % grid[1]),
                 z = (uint32_t)(linear / ((uint64_t)grid[0] * grid[1]));
        blockIdx = uint3{x, y, z};
        block_tag = (uint32_t)linear + 1;
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

// ---------------------------------------------------------------------------
// Arrays of pointers (a pointer-array batch): the harness fills them with its own addresses of
// the buffers; each entry that falls in a buffer of the launch gets this process's address of
// the same byte before the launch, and its own back after (an entry the kernel overwrote stays
// as the kernel left it: the harness sees the change). Entries elsewhere (the arrays' guard
// pattern) are left as they are: dereferenced, they fault, as on the GPU.
// ---------------------------------------------------------------------------
struct Relocated
{
    uint64_t *entry;
    uint64_t theirs, ours;
};

static std::vector<Relocated> relocate_pointer_arrays(int n, char *const *starts, const uint64_t *sizes,
                                                      const uint64_t *host_base, uint32_t arrays)
{
    std::vector<Relocated> done;
    for (int i = 0; i < n; i++)
    {
        if (!(arrays >> i & 1))
            continue;
        uint64_t *entry = (uint64_t *)starts[i];
        for (uint64_t k = 0; k < sizes[i] / sizeof(uint64_t); k++)
            for (int j = 0; j < n; j++)
                if (entry[k] >= host_base[j] && entry[k] - host_base[j] < sizes[j])
                {
                    uint64_t ours = (uint64_t)(uintptr_t)starts[j] + (entry[k] - host_base[j]);
                    done.push_back({&entry[k], entry[k], ours});
                    entry[k] = ours;
                    break;
                }
    }
    return done;
}

static void restore_pointer_arrays(const std::vector<Relocated> &done)
{
    for (const Relocated &r : done)
        if (*r.entry == r.ours)
            *r.entry = r.theirs;
}

#ifndef CUDASIM_ASAN_RUNNER
// ---------------------------------------------------------------------------
// The worker: argv = socket fd, report memfd. Requests: cs_request + memfds.
// ---------------------------------------------------------------------------
#include <link.h>

struct Module { std::string *path; void *handle; const cudasim_kernel *kernels; int count; uintptr_t base; };

static std::vector<Module> modules;
// The reply's first byte (worker.py mirrors them): done; a request the worker cannot run; a
// module that does not load (dlopen's error follows: a failure of the simulator, not the kernel's).
enum { STATUS_DONE = 0, STATUS_BAD_REQUEST = 1, STATUS_MODULE_NOT_LOADED = 2 };

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
        int status = STATUS_DONE;
        reset_report();
        Module *m = module_for(rq.module, error, sizeof error);
        std::vector<std::pair<void *, size_t>> maps;
        if (!m)
            status = STATUS_MODULE_NOT_LOADED;
        else if (rq.kernel < 0 || rq.kernel >= m->count || nfds != rq.npointers)
        {
            snprintf(error, sizeof error, "bad request: kernel %d of %d, %d fds for %d pointers",
                     rq.kernel, m->count, nfds, rq.npointers);
            status = STATUS_BAD_REQUEST;
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
                    status = STATUS_BAD_REQUEST;
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
                else
                    track_global_buffers(maps, kernel_pointers);
                memcpy(kernel_arguments, rq.arguments, sizeof kernel_arguments);
                kernel_fn = m->kernels[rq.kernel].launch;
                char *starts[MAX_POINTERS];
                uint64_t sizes[MAX_POINTERS];
                for (int i = 0; i < rq.npointers; i++)
                    starts[i] = (char *)maps[i].first, sizes[i] = rq.pointer_offset[i] + rq.pointer_length[i];
                std::vector<Relocated> relocated =
                    relocate_pointer_arrays(rq.npointers, starts, sizes, rq.pointer_host_base, rq.pointer_arrays);
                run_grid(rq.grid, rq.block, rq.schedule, rq.seed);
                restore_pointer_arrays(relocated);
                untrack_global_buffers();
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
// argv: kernel-index gx gy gz bx by bz argument-bytes-in-hex npointers arrays-mask
// (path bytes host-base)...: host-base, the buffer's address in the harness's process, which
// the arrays of pointers (bit i of the mask: buffer i is one) hold. Writes every buffer back
// to its file after the launch.
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
    const char *hex = next();
    for (size_t i = 0; hex[2 * i] && hex[2 * i + 1] && i < sizeof kernel_arguments; i++)
    {
        char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
        kernel_arguments[i] = (unsigned char)strtoul(pair, nullptr, 16);
    }
    int np = atoi(next());
    if (np < 0 || np > MAX_POINTERS)
        return 2;
    uint32_t arrays = (uint32_t)strtoul(next(), nullptr, 10);
    std::vector<const char *> paths;
    std::vector<size_t> sizes;
    uint64_t host_base[MAX_POINTERS], lengths[MAX_POINTERS];
    for (int i = 0; i < np; i++)
    {
        paths.push_back(next());
        sizes.push_back((size_t)atoll(next()));
        host_base[i] = (uint64_t)strtoull(next(), nullptr, 10);
        lengths[i] = sizes.back();
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
    std::vector<Relocated> relocated =
        relocate_pointer_arrays(np, (char *const *)kernel_pointers, lengths, host_base, arrays);
    run_grid(grid, block, SCHED_FORWARD, 0);
    restore_pointer_arrays(relocated);
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
