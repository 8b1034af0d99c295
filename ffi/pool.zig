//! The compute pool: N-1 persistent worker threads plus the calling thread.
//!
//! A dispatch publishes a job (a function and a context pointer) and bumps a
//! generation counter; workers spin on that counter for a while
//! (`std.atomic.spinLoopHint`), then park on a futex. The caller runs share 0
//! itself, then waits for a completion counter that sits on its own cache line.
//! A dispatch allocates nothing.
//!
//! Kernels split their output rows into contiguous ranges aligned to their row
//! group (`split`), so every output element is computed by exactly one thread
//! with the same instructions in the same order as with one thread: results are
//! bit-identical for every thread count.
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

/// Spin iterations of a waiting thread before it parks on a futex
/// (about 100 µs at ~40 cycles per `pause`).
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

/// A type-erased job: `run(context, thread_index, thread_count)`.
const JobFn = *const fn (context: *const anyopaque, thread_index: u32, thread_count: u32) void;

pub const Pool = struct {
    // Written by the caller on each dispatch, read by the workers.
    generation: Atomic(u32) align(cache_line) = .init(0),
    job_fn: JobFn = undefined,
    job_context: *const anyopaque = undefined,
    stop: Atomic(bool) = .init(false),

    // Written by each worker as it finishes.
    remaining: Atomic(u32) align(cache_line) = .init(0),

    // Parking state, touched only on the slow path.
    sleepers: Atomic(u32) align(cache_line) = .init(0),
    caller_parked: Atomic(u32) = .init(0),
    panicked: Atomic(u32) = .init(0),

    // The graph barrier (see `barrier`): arrivals and the phase they wait to change.
    barrier_arrived: Atomic(u32) align(cache_line) = .init(0),
    barrier_phase: Atomic(u32) align(cache_line) = .init(0),
    barrier_sleepers: Atomic(u32) = .init(0),

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

    /// Runs `func(context, thread_index, thread_count)` on every thread and waits for all.
    /// With `work_units` below `parallel_threshold` (or one thread) it runs once, inline,
    /// as `func(context, 0, 1)`.
    pub fn run(
        pool: *Pool,
        comptime Context: type,
        context: *const Context,
        comptime func: fn (*const Context, u32, u32) void,
        work_units: usize,
        parallel_threshold: usize,
    ) Status {
        const Wrapper = struct {
            fn call(erased: *const anyopaque, index: u32, count: u32) void {
                func(@ptrCast(@alignCast(erased)), index, count);
            }
        };
        if (graph_pool) |graph| {
            std.debug.assert(graph == pool);
            // Inside a graph every thread calls `run` with the same arguments. A small
            // step runs on thread 0 alone; a parallel one waits for thread 0's serial
            // steps, computes this thread's share, then waits for the others.
            if (pool.thread_count == 1 or work_units < parallel_threshold) {
                if (graph_index == 0) func(context, 0, 1);
                // A worker that has just joined saw every earlier step's results
                // through the wake-up itself.
                if (!graph_joining) graph_serial_pending = true;
                return .ok;
            }
            graph_joining = false;
            if (graph_index == 0 and !graph_state.?.workers_joined) {
                // The first parallel step: the workers start here, so no earlier serial
                // step of the caller's is pending for them.
                pool.wakeIntoGraph();
                graph_serial_pending = false;
            }
            if (graph_serial_pending) {
                graph_serial_pending = false;
                const status = pool.barrier();
                if (status != .ok) return status;
            }
            func(context, graph_index, pool.thread_count);
            return pool.barrier();
        }
        if (pool.thread_count == 1 or work_units < parallel_threshold) {
            func(context, 0, 1);
            return .ok;
        }
        return pool.dispatch(Wrapper.call, context);
    }

    /// Runs `func(context)` on the thread with index 0 only. Outside a graph that is
    /// the caller; inside one, the others wait for it at the next parallel step.
    pub fn runSerial(pool: *Pool, comptime Context: type, context: *const Context, comptime func: fn (*const Context) void) Status {
        if (graph_pool) |graph| {
            std.debug.assert(graph == pool);
        } else {
            func(context);
            return .ok;
        }
        if (graph_index == 0) func(context);
        if (!graph_joining) graph_serial_pending = true;
        return .ok;
    }

    /// Runs a graph: `func(context, first_step)` walks its steps from `first_step`,
    /// calling `graphStep(n)` before step n and the kernels' `run` inside, which
    /// inside a graph becomes "this thread's share, then the barrier" instead of a
    /// dispatch. The caller starts alone and runs small steps by itself; the
    /// workers are woken at the first parallel step and join the walk there, so a
    /// graph of small steps never wakes them.
    pub fn runGraph(
        pool: *Pool,
        comptime Context: type,
        context: *const Context,
        comptime func: fn (*const Context, usize) Status,
    ) Status {
        std.debug.assert(graph_pool == null);
        const Joiner = struct {
            fn call(erased: *const anyopaque, index: u32, _: u32) void {
                const graph: *const GraphState = @ptrCast(@alignCast(erased));
                enterGraph(graph.pool, index);
                defer graph_pool = null;
                const status = func(@ptrCast(@alignCast(graph.context)), graph.first_step);
                if (status != .ok) graph.status.store(@intFromEnum(status), .monotonic);
            }
        };
        var status: Atomic(i32) = .init(0);
        var graph: GraphState = .{
            .pool = pool,
            .context = context,
            .status = &status,
            .join_fn = Joiner.call,
        };
        pool.barrier_arrived.store(0, .monotonic);
        enterGraph(pool, 0);
        graph_state = &graph;
        const own = func(context, 0);
        graph_pool = null;
        graph_state = null;
        const joined = if (graph.workers_joined) pool.join() else Status.ok;
        if (own != .ok) return own;
        if (joined != .ok) return joined;
        return @enumFromInt(status.load(.monotonic));
    }

    /// Wakes the workers into the running graph at the caller's current step.
    fn wakeIntoGraph(pool: *Pool) void {
        const graph = graph_state.?;
        graph.first_step = graph_step;
        graph.workers_joined = true;
        pool.publish(graph.join_fn, graph);
    }

    /// Waits until every thread of a graph has arrived: spins, then parks on a futex.
    /// Returns `worker_panicked` (without waiting further) once a worker has panicked,
    /// so a graph never hangs on a thread that will not arrive.
    pub fn barrier(pool: *Pool) Status {
        if (pool.thread_count == 1) return .ok;
        const phase = pool.barrier_phase.load(.acquire);
        if (pool.barrier_arrived.fetchAdd(1, .acq_rel) + 1 == pool.thread_count) {
            pool.barrier_arrived.store(0, .monotonic);
            pool.barrier_phase.store(phase +% 1, .release);
            if (pool.barrier_sleepers.load(.seq_cst) > 0) Futex.wake(&pool.barrier_phase, std.math.maxInt(u32));
            return .ok;
        }
        var spins: u32 = 0;
        while (pool.barrier_phase.load(.acquire) == phase) {
            if (pool.panicked.load(.acquire) != 0) return .worker_panicked;
            if (spins < pool.spin_limit) {
                std.atomic.spinLoopHint();
                spins += 1;
                continue;
            }
            _ = pool.barrier_sleepers.fetchAdd(1, .seq_cst);
            if (pool.barrier_phase.load(.seq_cst) == phase) {
                // Timed, so a panicked worker (which never arrives) is noticed.
                Futex.timedWait(&pool.barrier_phase, phase, std.time.ns_per_ms) catch {};
            }
            _ = pool.barrier_sleepers.fetchSub(1, .seq_cst);
        }
        return .ok;
    }

    fn dispatch(pool: *Pool, job_fn: JobFn, job_context: *const anyopaque) Status {
        pool.publish(job_fn, job_context);
        job_fn(job_context, 0, pool.thread_count);
        return pool.join();
    }

    /// Hands a job to every worker (the caller runs its own share itself).
    fn publish(pool: *Pool, job_fn: JobFn, job_context: *const anyopaque) void {
        const worker_count = pool.thread_count - 1;
        pool.job_fn = job_fn;
        pool.job_context = job_context;
        pool.remaining.store(worker_count, .monotonic);
        _ = pool.generation.fetchAdd(1, .seq_cst);
        if (pool.sleepers.load(.seq_cst) > 0) Futex.wake(&pool.generation, std.math.maxInt(u32));
    }

    /// Waits until every worker has finished the published job.
    fn join(pool: *Pool) Status {
        var spins: u32 = 0;
        while (true) {
            const left = pool.remaining.load(.acquire);
            if (left == 0) break;
            if (spins < pool.spin_limit) {
                std.atomic.spinLoopHint();
                spins += 1;
                continue;
            }
            pool.caller_parked.store(1, .seq_cst);
            if (pool.remaining.load(.seq_cst) != 0) Futex.wait(&pool.remaining, left);
            pool.caller_parked.store(0, .seq_cst);
        }
        if (pool.panicked.swap(0, .acq_rel) != 0) return .worker_panicked;
        return .ok;
    }

    /// Marks this worker's share of the current job as done.
    fn finishShare(pool: *Pool) void {
        if (pool.remaining.fetchSub(1, .acq_rel) == 1) {
            if (pool.caller_parked.load(.seq_cst) != 0) Futex.wake(&pool.remaining, 1);
        }
    }

    /// A worker's loop: wait for a new generation, run the job, count it done.
    fn serve(pool: *Pool, index: u32, generation_seen_start: u32) void {
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
            worker_generation = generation;
            pool.job_fn(pool.job_context, index, pool.thread_count);
            pool.finishShare();
        }
    }
};

/// The pool and index of the worker running on this thread (null on other threads).
threadlocal var worker_pool: ?*Pool = null;
/// The pool whose graph this thread is running (see `Pool.runGraph`), and its index.
threadlocal var graph_pool: ?*Pool = null;
threadlocal var graph_index: u32 = 0;
/// True when thread 0 has run serial steps since the last barrier: the next parallel
/// step must first wait for them (consecutive serial steps need no barrier).
threadlocal var graph_serial_pending: bool = false;
/// The step a graph walk is at (set by `graphStep`), and, on the caller, its state.
threadlocal var graph_step: usize = 0;
/// True on a worker from joining a graph until its first parallel step.
threadlocal var graph_joining: bool = false;
threadlocal var graph_state: ?*GraphState = null;

/// A running graph, as the caller shares it with the workers when they join.
const GraphState = struct {
    pool: *Pool,
    context: *const anyopaque,
    status: *Atomic(i32),
    join_fn: JobFn,
    first_step: usize = 0,
    workers_joined: bool = false,
};

fn enterGraph(pool: *Pool, index: u32) void {
    graph_pool = pool;
    graph_index = index;
    graph_joining = index != 0;
    graph_serial_pending = false;
    graph_step = 0;
}

/// Called by a graph walk before each step (see `Pool.runGraph`).
pub fn graphStep(step: usize) void {
    graph_step = step;
}
threadlocal var worker_index: u32 = 0;
threadlocal var worker_generation: u32 = 0;

fn workerMain(pool: *Pool, index: u32) void {
    worker_pool = pool;
    worker_index = index;
    // Generation 0 is never a job: the pool starts at 0 and every dispatch bumps it.
    pool.serve(index, 0);
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
    graph_pool = null;
    pool.finishShare();
    // The panicking job's frames are abandoned (kernels hold no resources).
    pool.serve(worker_index, worker_generation);
    // The pool is stopping: end this thread without returning into the abandoned frames.
    // The kernel clears the thread id on exit, so `join` still returns.
    if (builtin.os.tag == .linux) std.os.linux.exit(0);
    var never = std.atomic.Value(u32).init(0); // elsewhere: park this thread for good
    while (true) std.Thread.Futex.wait(&never, 0);
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

/// The `index`-th of `count` contiguous ranges of `units` units, each a multiple of
/// `group` units except the last: `[begin, end)`. Every unit lands in exactly one range.
pub fn split(units: usize, group: usize, index: u32, count: u32) struct { begin: usize, end: usize } {
    std.debug.assert(group > 0 and count > 0 and index < count);
    const groups = (units + group - 1) / group;
    const begin = @min(units, groups * index / count * group);
    const end = @min(units, groups * (index + 1) / count * group);
    return .{ .begin = begin, .end = end };
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

/// The pool's scratch size in bytes.
export fn dotllm_pool_scratch_size(pool: *const Pool) usize {
    return pool.scratch.len;
}

/// The number of CPUs in this process's affinity mask.
export fn dotllm_cpu_count() u32 {
    return cpuCount();
}

const Empty = struct {};
fn emptyJob(_: *const Empty, _: u32, _: u32) void {}

/// Dispatches an empty job on every thread and joins (for benchmarks and tests).
export fn dotllm_pool_noop(pool: *Pool) i32 {
    return @intFromEnum(pool.run(Empty, &.{}, emptyJob, 1, 0));
}

const PanicJob = struct { panicking_index: u32 };
fn panicJob(job: *const PanicJob, index: u32, _: u32) void {
    if (index == job.panicking_index) @panic("dotllm_pool_panic_test: deliberate panic");
}

/// Test hook: dispatches a job whose share `worker_index` (>= 1: a worker, never the
/// caller) panics. Returns the dispatch status (1: worker_panicked).
export fn dotllm_pool_panic_test(pool: *Pool, worker_index_to_panic: u32) i32 {
    std.debug.assert(worker_index_to_panic >= 1 and worker_index_to_panic < pool.thread_count);
    return @intFromEnum(pool.run(PanicJob, &.{ .panicking_index = worker_index_to_panic }, panicJob, 1, 0));
}

// ---------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "split covers every unit exactly once, in group-aligned ranges" {
    for ([_]usize{ 0, 1, 3, 4, 5, 31, 33, 4096 + 7 }) |units| {
        for (1..9) |count| {
            var next: usize = 0;
            for (0..count) |index| {
                const range = split(units, 4, @intCast(index), @intCast(count));
                try testing.expectEqual(next, range.begin);
                try testing.expect(range.begin % 4 == 0 or range.begin == units);
                next = range.end;
            }
            try testing.expectEqual(units, next);
        }
    }
}

const CountJob = struct {
    hits: *[thread_count_max]Atomic(u32),
};
fn countJob(job: *const CountJob, index: u32, _: u32) void {
    _ = job.hits[index].fetchAdd(1, .monotonic);
}

test "10,000 tiny dispatches run every share exactly once" {
    const pool = try Pool.create(testing.allocator, 4);
    defer pool.destroy(testing.allocator);
    var hits: [thread_count_max]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    for (0..10_000) |_| try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 1, 0));
    for (hits[0..4]) |h| try testing.expectEqual(@as(u32, 10_000), h.load(.monotonic));
}

test "pools are created and destroyed repeatedly, also after parking" {
    for (0..100) |i| {
        const pool = try Pool.create(testing.allocator, @intCast(1 + i % 4));
        if (i % 10 == 0) std.Thread.sleep(2 * std.time.ns_per_ms); // workers park
        var hits: [thread_count_max]Atomic(u32) = @splat(.init(0));
        const job: CountJob = .{ .hits = &hits };
        try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 1, 0));
        pool.destroy(testing.allocator);
    }
}

test "dispatch after the workers parked wakes them" {
    const pool = try Pool.create(testing.allocator, 3);
    defer pool.destroy(testing.allocator);
    var hits: [thread_count_max]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    for (0..5) |_| {
        std.Thread.sleep(5 * std.time.ns_per_ms);
        try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 1, 0));
    }
    for (hits[0..3]) |h| try testing.expectEqual(@as(u32, 5), h.load(.monotonic));
}

test "small work runs inline on one thread" {
    const pool = try Pool.create(testing.allocator, 4);
    defer pool.destroy(testing.allocator);
    var hits: [thread_count_max]Atomic(u32) = @splat(.init(0));
    const job: CountJob = .{ .hits = &hits };
    try testing.expectEqual(Status.ok, pool.run(CountJob, &job, countJob, 10, 100));
    try testing.expectEqual(@as(u32, 1), hits[0].load(.monotonic));
    try testing.expectEqual(@as(u32, 0), hits[1].load(.monotonic));
}

test "cpuCount is at least one" {
    try testing.expect(cpuCount() >= 1);
}
