//! The compute pool: N-1 persistent worker threads plus the calling thread.
//!
//! A dispatch publishes a job (a function, a context pointer and a number of work
//! units) and bumps a generation counter; workers spin on that counter for a while
//! (`std.atomic.spinLoopHint`), then park on a futex. Every thread, the caller
//! included, then claims chunks of units (aligned to the kernel's row group) from an
//! atomic counter until none are left. The caller closes the job and waits only for
//! the workers that joined it: a worker the OS has not scheduled yet never delays a
//! dispatch (it sees the job closed and skips it). The claim counter, the active
//! counter and the dispatch fields sit on separate cache lines. A dispatch
//! allocates nothing.
//!
//! Every unit is computed by exactly one thread, with the same instructions in the
//! same order whichever thread claims it, so results are bit-identical for every
//! thread count.
//!
//! Failure: a worker that panics (a safety check in Debug/ReleaseSafe, or an
//! explicit `@panic` in any mode) prints the message, still counts its share as
//! done, and keeps serving; the dispatch then returns `Status.worker_panicked`.
//! In ReleaseFast safety checks are compiled out, so a kernel bug is undefined
//! behaviour there (no report); explicit `@panic`s are still reported.
const std = @import("std");
const builtin = @import("builtin");

const Futex = std.Thread.Futex;
const Atomic = std.atomic.Value;
const cache_line = std.atomic.cache_line;

/// Most threads a pool may have (TIGER_STYLE: a limit on everything).
pub const thread_count_max: u32 = 256;

/// Spin iterations of a waiting thread before it parks on a futex (≈ 400 µs on the
/// development VM, where a `pause` takes ≈ 50 ns): long enough to stay hot between the
/// kernels of a forward pass, short enough to stop burning a CPU soon after.
pub const spin_count_max: u32 = 1 << 13;

/// Spin iterations when the pool has more threads than CPUs.
pub const spin_count_oversubscribed: u32 = 16;

/// Largest scratch a pool reserves (16 GiB).
pub const scratch_size_max_bytes: usize = 1 << 34;

/// The result of a dispatch, as returned by every pool-using export.
pub const Status = enum(i32) {
    ok = 0,
    worker_panicked = 1,
};

/// A type-erased job: `run(context, begin, end)` computes units [begin, end).
const JobFn = *const fn (context: *const anyopaque, begin: usize, end: usize) void;

/// Chunks per thread a job is cut into, at least (more: better balance, more claims,
/// and for a GEMV more restarts of its weight prefetch).
pub const chunks_per_thread_min = 4;
/// Chunks per thread at most, for a job with `chunk_work_min` work per chunk or more
/// (prompt matmuls): a thread that the host deschedules mid-chunk then holds the others
/// up by a 16th of its share rather than a 4th. On the shared 2-vCPU Zen 3 host, 1B-shape
/// Q4_K_M pp64 at 2 threads, 12 alternating rounds, tok/s: always 4 chunks 63-105
/// (median 93, mean 89), up to 16 for big jobs 79-114 (median 98, mean 97). 16 chunks
/// for every job cost decode steps (tg16 at 2 threads) 0-20% in 4 rounds: small GEMVs keep 4.
pub const chunks_per_thread_max = 16;
/// Work (the `work` of `run`: multiply-adds for a matmul) per chunk below which a job
/// keeps `chunks_per_thread_min`: a decode step's GEMVs (a 2048 × 8192 one is 2^24).
pub const chunk_work_min: usize = 1 << 24;

/// Chunks per thread for a job of `work` on `thread_count` threads.
fn chunksPerThread(work: usize, thread_count: usize) usize {
    return std.math.clamp(work / chunk_work_min / thread_count, chunks_per_thread_min, chunks_per_thread_max);
}

pub const Pool = struct {
    // Written by the caller on each dispatch, read by the workers.
    generation: Atomic(u32) align(cache_line) = .init(0),
    job_fn: JobFn = undefined,
    job_context: *const anyopaque = undefined,
    job_units: usize = 0,
    job_chunk_units: usize = 1,
    /// 0 while the current job takes new workers, 1 once the caller closed it.
    closed: Atomic(u32) = .init(1),
    stop: Atomic(bool) = .init(false),

    // The next unchunked unit, claimed by every thread.
    next_unit: Atomic(usize) align(cache_line) = .init(0),

    // Workers inside the current job.
    active: Atomic(u32) align(cache_line) = .init(0),

    // Parking state, touched only on the slow path.
    sleepers: Atomic(u32) align(cache_line) = .init(0),
    caller_parked: Atomic(u32) = .init(0),
    panicked: Atomic(u32) = .init(0),

    thread_count: u32,
    /// Spins before parking: `spin_count_max`, or almost none when the pool has more
    /// threads than CPUs (a spinning thread would then steal the CPU of the one it waits for).
    spin_limit: u32 = spin_count_max,
    threads: [thread_count_max]std.Thread = undefined,

    /// Activation scratch (Q8 quantized activations), grown by `reserve`, never on a hot path.
    scratch: []align(64) u8 = &.{},

    /// Creates a pool of `thread_count` threads (0: every CPU this process may run on).
    pub fn create(allocator: std.mem.Allocator, thread_count_requested: u32) !*Pool {
        const count = if (thread_count_requested == 0) cpuCount() else thread_count_requested;
        if (count > thread_count_max) return error.TooManyThreads;
        const pool = try allocator.create(Pool);
        errdefer allocator.destroy(pool);
        pool.* = .{
            .thread_count = count,
            .spin_limit = if (count <= cpuCount()) spin_count_max else spin_count_oversubscribed,
        };
        var spawned: u32 = 0;
        errdefer pool.joinWorkers(spawned);
        for (1..count) |index| {
            pool.threads[index] = try std.Thread.spawn(.{ .stack_size = 1 << 20 }, workerMain, .{ pool, @as(u32, @intCast(index)) });
            spawned += 1;
        }
        return pool;
    }

    /// Stops and joins every worker, then frees the pool and its scratch.
    pub fn destroy(pool: *Pool, allocator: std.mem.Allocator) void {
        pool.joinWorkers(pool.thread_count - 1);
        if (pool.scratch.len > 0) allocator.free(pool.scratch);
        allocator.destroy(pool);
    }

    fn joinWorkers(pool: *Pool, spawned: u32) void {
        pool.stop.store(true, .seq_cst);
        _ = pool.generation.fetchAdd(1, .seq_cst);
        Futex.wake(&pool.generation, std.math.maxInt(u32));
        for (pool.threads[1 .. 1 + spawned]) |thread| thread.join();
    }

    /// Ensures the scratch holds at least `size_bytes`. Allocates only when it grows.
    pub fn reserve(pool: *Pool, allocator: std.mem.Allocator, size_bytes: usize) !void {
        if (size_bytes <= pool.scratch.len) return;
        if (size_bytes > scratch_size_max_bytes) return error.OutOfMemory;
        const grown = try allocator.alignedAlloc(u8, .@"64", size_bytes);
        if (pool.scratch.len > 0) allocator.free(pool.scratch);
        pool.scratch = grown;
    }

    /// Computes units [0, units) with `func(context, begin, end)` on every thread, in
    /// chunks that are multiples of `group` units (except the last), and waits for all.
    /// With `work` below `parallel_threshold` (or one thread) it runs once, inline, as
    /// `func(context, 0, units)`.
    pub fn run(
        pool: *Pool,
        comptime Context: type,
        context: *const Context,
        comptime func: fn (*const Context, usize, usize) void,
        units: usize,
        group: usize,
        work: usize,
        parallel_threshold: usize,
    ) Status {
        std.debug.assert(group > 0);
        const Wrapper = struct {
            fn call(erased: *const anyopaque, begin: usize, end: usize) void {
                func(@ptrCast(@alignCast(erased)), begin, end);
            }
        };
        if (units == 0) return .ok;
        if (pool.thread_count == 1 or work < parallel_threshold or units <= group) {
            func(context, 0, units);
            return .ok;
        }
        const chunks_wanted = pool.thread_count * chunksPerThread(work, pool.thread_count);
        const chunk_groups = @max(1, (units + group * chunks_wanted - 1) / (group * chunks_wanted));
        return pool.dispatch(Wrapper.call, context, units, chunk_groups * group);
    }

    fn dispatch(pool: *Pool, job_fn: JobFn, job_context: *const anyopaque, units: usize, chunk_units: usize) Status {
        pool.job_fn = job_fn;
        pool.job_context = job_context;
        pool.job_units = units;
        pool.job_chunk_units = chunk_units;
        pool.next_unit.store(0, .monotonic);
        pool.closed.store(0, .release);
        _ = pool.generation.fetchAdd(1, .seq_cst);
        if (pool.sleepers.load(.seq_cst) > 0) Futex.wake(&pool.generation, std.math.maxInt(u32));

        pool.runChunks();

        // Close the job, then wait for the workers that joined it. A worker that joins
        // after this sees `closed` and leaves without touching the job.
        pool.closed.store(1, .seq_cst);
        var spins: u32 = 0;
        while (true) {
            const active = pool.active.load(.seq_cst);
            if (active == 0) break;
            if (spins < pool.spin_limit) {
                std.atomic.spinLoopHint();
                spins += 1;
                continue;
            }
            pool.caller_parked.store(1, .seq_cst);
            if (pool.active.load(.seq_cst) == active) Futex.wait(&pool.active, active);
            pool.caller_parked.store(0, .seq_cst);
        }
        if (pool.panicked.swap(0, .acq_rel) != 0) return .worker_panicked;
        return .ok;
    }

    /// Claims and runs chunks of the current job until none are left.
    fn runChunks(pool: *Pool) void {
        const units = pool.job_units;
        const chunk = pool.job_chunk_units;
        while (true) {
            const begin = pool.next_unit.fetchAdd(chunk, .monotonic);
            if (begin >= units) return;
            pool.job_fn(pool.job_context, begin, @min(units, begin + chunk));
        }
    }

    /// Leaves the current job (the caller may be waiting for the last one out).
    fn leaveJob(pool: *Pool) void {
        if (pool.active.fetchSub(1, .seq_cst) == 1) {
            if (pool.caller_parked.load(.seq_cst) != 0) Futex.wake(&pool.active, 1);
        }
    }

    /// A worker's loop: wait for a new generation, join the job if still open, leave.
    fn serve(pool: *Pool, generation_seen_start: u32) void {
        var generation_seen = generation_seen_start;
        while (true) {
            var spins: u32 = 0;
            var generation = pool.generation.load(.acquire);
            while (generation == generation_seen) {
                if (spins < pool.spin_limit) {
                    std.atomic.spinLoopHint();
                    spins += 1;
                } else {
                    _ = pool.sleepers.fetchAdd(1, .seq_cst);
                    Futex.wait(&pool.generation, generation_seen);
                    _ = pool.sleepers.fetchSub(1, .seq_cst);
                }
                generation = pool.generation.load(.acquire);
            }
            generation_seen = generation;
            if (pool.stop.load(.acquire)) return;
            _ = pool.active.fetchAdd(1, .seq_cst);
            if (pool.closed.load(.seq_cst) == 0) {
                worker_generation = generation_seen;
                pool.runChunks();
            }
            pool.leaveJob();
        }
    }
};

/// The pool and index of the worker running on this thread (null on other threads).
threadlocal var worker_pool: ?*Pool = null;
threadlocal var worker_index: u32 = 0;
threadlocal var worker_generation: u32 = 0;

fn workerMain(pool: *Pool, index: u32) void {
    worker_pool = pool;
    worker_index = index;
    // Generation 0 is never a job: the pool starts at 0 and every dispatch bumps it.
    pool.serve(0);
}

/// The library's panic handler (installed in `lib.zig`). On a pool worker it reports
/// the panic, counts the worker's share as done so the caller never waits forever,
/// and keeps serving from a fresh frame; the dispatch returns `worker_panicked`.
/// Anywhere else it is Zig's default handler (message, stack trace, abort).
pub fn panicHandler(message: []const u8, first_trace_address: ?usize) noreturn {
    @branchHint(.cold);
    const pool = worker_pool orelse std.debug.defaultPanic(message, first_trace_address);
    std.debug.print("dotllm: pool worker {d} panicked: {s}\n", .{ worker_index, message });
    pool.panicked.store(1, .release);
    pool.leaveJob();
    // The panicking job's frames are abandoned (kernels hold no resources).
    pool.serve(worker_generation);
    // The pool is stopping: end this thread without returning into the abandoned frames.
    // On Linux the kernel clears the thread id on exit, so `join` still returns; other
    // systems park the thread for good (`destroy` would then wait: documented limit).
    if (builtin.os.tag == .linux) {
        std.os.linux.exit(0);
    } else {
        var never: Atomic(u32) = .init(0);
        while (true) Futex.wait(&never, 0);
    }
}

/// How many CPUs this process may run on (its affinity mask), at least 1.
pub fn cpuCount() u32 {
    if (builtin.os.tag == .linux) {
        if (std.posix.sched_getaffinity(0)) |set| {
            const count: u32 = std.os.linux.CPU_COUNT(set);
            if (count > 0) return @min(count, thread_count_max);
        } else |_| {}
    }
    const count = std.Thread.getCpuCount() catch 1;
    return @intCast(@min(@max(count, 1), thread_count_max));
}

// ---------------------------------------------------------------------------
// Exports

const c_allocator = std.heap.c_allocator;

/// Creates a pool of `thread_count` threads (0: the affinity mask's CPU count). 0 on failure.
export fn dotllm_pool_create(thread_count: u32) usize {
    const pool = Pool.create(c_allocator, thread_count) catch return 0;
    return @intFromPtr(pool);
}

export fn dotllm_pool_destroy(pool: *Pool) void {
    pool.destroy(c_allocator);
}

export fn dotllm_pool_thread_count(pool: *const Pool) u32 {
    return pool.thread_count;
}

/// Grows the pool's activation scratch to at least `size_bytes`. 0 on success, -1 out of memory.
export fn dotllm_pool_reserve(pool: *Pool, size_bytes: usize) i32 {
    pool.reserve(c_allocator, size_bytes) catch return -1;
    return 0;
}

/// The number of CPUs in this process's affinity mask.
export fn dotllm_cpu_count() u32 {
    return cpuCount();
}

const Empty = struct {};
fn emptyJob(_: *const Empty, _: usize, _: usize) void {}

/// Dispatches an empty job (one unit per thread) and joins (for benchmarks and tests).
export fn dotllm_pool_noop(pool: *Pool) i32 {
    return @intFromEnum(pool.run(Empty, &.{}, emptyJob, pool.thread_count, 1, 1, 0));
}

const PanicJob = struct {};
fn panicJob(_: *const PanicJob, _: usize, _: usize) void {
    if (worker_pool != null) @panic("dotllm_pool_panic_test: deliberate panic");
    std.Thread.sleep(std.time.ns_per_ms); // the caller's units are slow: a worker joins
}

/// Test hook: dispatches a job of 200 one-unit chunks in which every unit a worker
/// claims panics (the caller's take 1 ms each, so a worker joins). Returns the
/// dispatch status (1: worker_panicked; 0 only if no worker joined within 200 ms).
export fn dotllm_pool_panic_test(pool: *Pool) i32 {
    std.debug.assert(pool.thread_count >= 2);
    return @intFromEnum(pool.dispatch(struct {
        fn call(erased: *const anyopaque, begin: usize, end: usize) void {
            panicJob(@ptrCast(@alignCast(erased)), begin, end);
        }
    }.call, &PanicJob{}, 200, 1));
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

const CountJob = struct {
    hits: *[4096]Atomic(u32),
};
fn countJob(job: *const CountJob, begin: usize, end: usize) void {
    for (begin..end) |unit| _ = job.hits[unit].fetchAdd(1, .monotonic);
}

fn expectEachOnce(hits: *[4096]Atomic(u32), units: usize, times: u32) !void {
    for (hits[0..units]) |h| try testing.expectEqual(times, h.load(.monotonic));
    for (hits[units..]) |h| try testing.expectEqual(@as(u32, 0), h.load(.monotonic));
}

test "10,000 tiny dispatches run every unit exactly once" {
    const pool = try Pool.create(testing.allocator, 4);
    defer pool.destroy(testing.allocator);
    var hits: [4096]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    for (0..10_000) |_| try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 37, 4, 1, 0));
    try expectEachOnce(&hits, 37, 10_000);
}

test "pools are created and destroyed repeatedly, also after parking" {
    for (0..100) |i| {
        const pool = try Pool.create(testing.allocator, @intCast(1 + i % 4));
        if (i % 10 == 0) std.Thread.sleep(2 * std.time.ns_per_ms); // workers park
        var hits: [4096]Atomic(u32) = @splat(.init(0));
        const job: CountJob = .{ .hits = &hits };
        try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 4096, 1, 1, 0));
        try expectEachOnce(&hits, 4096, 1);
        pool.destroy(testing.allocator);
    }
}

test "dispatch after the workers parked wakes them" {
    const pool = try Pool.create(testing.allocator, 3);
    defer pool.destroy(testing.allocator);
    var hits: [4096]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    for (0..5) |_| {
        std.Thread.sleep(5 * std.time.ns_per_ms);
        try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 1000, 8, 1, 0));
    }
    try expectEachOnce(&hits, 1000, 5);
}

test "small work runs inline as one range" {
    const pool = try Pool.create(testing.allocator, 4);
    defer pool.destroy(testing.allocator);
    var hits: [4096]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 100, 4, 10, 100));
    try expectEachOnce(&hits, 100, 1);
}

test "cpuCount is at least one" {
    try testing.expect(cpuCount() >= 1);
}
