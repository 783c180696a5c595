// The search's driver: every chunk of a request through the stages, the
// statistics of a blocking search, and the scan choice's measurements.
#include <algorithm>

#include "cuda/event.h"
#include "cuda/launch.h"
#include "index/search_request.h"

namespace udf::rt {

namespace {

// A CUDA host function (no CUDA calls in it) that keeps the host pool's
// workers spinning for the next millisecond.
void CUDA_CB wake_host_pool(void* pool) { static_cast<HostPool*>(pool)->keep_awake(std::chrono::milliseconds(1)); }

// The scan choice for asynchronous searches: the scan time an earlier one
// measured, once the GPU has passed its end (cuEventQuery: no wait).
void read_pending_choice(udf_index* ix) {
  auto& pc = ix->scratch.pending_choice;
  if (!pc.choice) return;
  const CUresult q = cuda().cuEventQuery(ix->scratch.scan_end.get());
  if (q == CUDA_ERROR_NOT_READY) return;
  cu_check(q, "cuEventQuery");
  pc.choice->record(pc.scan, elapsed(ix->scratch.scan_begin, ix->scratch.scan_end), pc.pairs);
  pc = {};
}

// Whether a sharded search stages the call's host queries for every device
// (CoarseShare::stage_host), so that this index's own staging stays unused.
bool staged_for_all(const Request& request) { return request.share && request.share->stage_host; }

// Pinned staging for the call: a blocking call waits for each chunk, so one
// chunk's worth is reused; an asynchronous one stages all of its host
// queries.  The statistics come down from the schedule: its header, or a
// direct schedule's four words a query.
void prepare_staging(Request& request, bool host_queries, bool host_out) {
  udf_index* ix = request.ix;
  auto& scratch = ix->scratch;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  if (host_queries && !staged_for_all(request)) {
    scratch.staged.sync();  // an earlier call's copy out of it has finished
    scratch.h_in.ensure((request.blocking ? size_t(request.chunk_queries) : size_t(request.n)) * row_bytes,
                        "staged queries");
  }
  if (host_out) scratch.h_out.ensure(staged_result_bytes(size_t(request.chunk_queries), request.k), "staged results");
  const size_t header_bytes = std::max<size_t>(UDF_IVF_SCHED_V1_HEADER_WORDS, 4 * size_t(request.chunk_queries)) * 4;
  if (request.blocking) {
    scratch.h_header.ensure(header_bytes, "schedule header");
    ix->work = udf_search_work{};
  }
}

// Stages 1 and 2 for host queries, through pinned staging.  A few MB go in
// slices (kQuerySliceBytes), copied on the runtime's host pool: the copy
// engine and the coarse probe take each slice while the host copies the
// next.  A sharded search may stage them once for all its devices
// (CoarseShare::stage_host).
void stage_host_queries(Request& request, Chunk& chunk, bool timed) {
  udf_index* ix = request.ix;
  auto& scratch = ix->scratch;
  if (staged_for_all(request)) {  // the call is one chunk (CoarseShare)
    request.share->stage_host([&](uint32_t s0, uint32_t n, const std::uint8_t* at, bool probe) {
      if (s0 == 0 && timed) scratch.stage[0].record(request.stream);
      stage_queries_and_coarse(request, chunk, at, s0, n, true, probe ? SliceProbe::whole : SliceProbe::none);
    });
    return;
  }
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  const int64_t q0 = chunk.q0;
  std::uint8_t* dst = scratch.h_in.as<std::uint8_t>() + (request.blocking ? 0 : size_t(q0) * row_bytes);
  const bool sliced = chunk.nq * row_bytes >= 2 * kQuerySliceBytes;
  auto ready = [&](int64_t s0, int64_t n) {
    if (s0 == 0 && timed) scratch.stage[0].record(request.stream);
    stage_queries_and_coarse(request, chunk, dst + s0 * row_bytes, static_cast<uint32_t>(s0), static_cast<uint32_t>(n),
                             sliced);
  };
  if (sliced) {
    host_rows_in_slices(request.rt, request.queries, request.qstride, q0, chunk.nq, dst,
                        std::max<int64_t>(1, kQuerySliceBytes / row_bytes), ready);
  } else {
    rows_to_host(request.rt, request.queries, request.qstride, q0, chunk.nq, dst);
    ready(0, chunk.nq);
  }
  // The next call waits for this before it writes the staging again; a
  // blocking search has waited for its copies when it returns.
  if (!request.blocking) scratch.staged.record(request.stream);
}

// The schedule's header (for the statistics) comes down on the side stream,
// so the scan does not wait for the copy.
void copy_header_aside(Request& request, const Chunk& chunk) {
  auto& scratch = request.ix->scratch;
  scratch.stage[2].record(request.stream);
  CU(cuStreamWaitEvent, request.rt->aux_stream, scratch.stage[2].get(), 0);
  CU(cuMemcpyDtoHAsync, scratch.h_header.as<void>(), reinterpret_cast<CUdeviceptr>(chunk.sched.header),
     UDF_IVF_SCHED_V1_HEADER_WORDS * 4, request.rt->aux_stream);
  scratch.header_copied.record(request.rt->aux_stream);
}

// Results the host pool will copy out wake its workers when the scan ends,
// so that they are spinning, not asleep, when the copy comes: a host
// function on a stream of its own, which waits for nothing else.
void wake_pool_after_scan(Request& request) {
  auto& scratch = request.ix->scratch;
  scratch.scanned.record(request.stream);
  CU(cuStreamWaitEvent, request.rt->wake_stream, scratch.scanned.get(), 0);
  CU(cuLaunchHostFunc, request.rt->wake_stream, wake_host_pool, &host_pool(request.rt));
}

// A blocking search's statistics of a finished chunk: stage times (when
// timed), work items, vectors scored and list bytes read.
void add_chunk_stats(Request& request, const Chunk& chunk, bool timed, bool copy_header) {
  udf_index* ix = request.ix;
  auto& scratch = ix->scratch;
  udf_search_stats& st = ix->stats;
  if (timed) {
    st.coarse_ms += elapsed(scratch.stage[0], scratch.stage[1]);
    if (copy_header) {
      st.schedule_ms += elapsed(scratch.stage[1], scratch.stage[2]);
      st.scan_ms += elapsed(scratch.stage[2], scratch.stage[3]);
    } else {
      st.scan_ms += elapsed(scratch.stage[1], scratch.stage[3]);
    }
    st.merge_ms += elapsed(scratch.stage[3], scratch.stage[4]);
  }
  st.chunks += 1;
  st.queries_per_item = chunk.qpi;
  const uint32_t* h = scratch.h_header.as<uint32_t>();
  uint64_t scored = 0, groups = 0;
  if (chunk.direct) {
    st.work_items += chunk.items_max;
    for (uint32_t q = 0; q < chunk.nq; ++q, h += 4) {
      scored += h[0] | uint64_t(h[1]) << 32;
      groups += h[2] | uint64_t(h[3]) << 32;
    }
  } else {
    st.work_items += h[0];
    scored = h[4] | uint64_t(h[5]) << 32;
    groups = h[6] | uint64_t(h[7]) << 32;
  }
  ix->work.scored += scored;
  ix->work.list_bytes_read += groups * 32 * ix->dim_padded * ix->esize;
}

// A blocking search's end of a chunk: the wait, then the results copied
// out, the scan choice's measurement and the statistics.  No `done` event:
// the wait reaches the end of this search, and done_reached spares the next
// search the wait on it.
void finish_blocking_chunk(Request& request, Chunk& chunk, bool timed, bool copy_header, bool host_out) {
  udf_index* ix = request.ix;
  auto& scratch = ix->scratch;
  CU(cuStreamSynchronize, request.stream);
  read_pending_choice(ix);  // an earlier asynchronous search's, complete now
  if (copy_header) scratch.header_copied.sync();  // before the next chunk's schedule overwrites the header
  if (host_out) finish_chunk(request, chunk, scratch.h_out.as<std::uint8_t>());
  if (chunk.choice)
    chunk.choice->record(chunk.choice_scan, elapsed(scratch.scan_begin, scratch.scan_end),
                         double(chunk.nq) * request.n_probes);
  chunk.choice = nullptr;
  add_chunk_stats(request, chunk, timed, copy_header);
}

// One chunk (rows q0 .. q0 + nq) through the stages.
void run_chunk(Request& request, int64_t q0, bool timed, bool host_out) {
  auto& scratch = request.ix->scratch;
  Chunk chunk;
  chunk.q0 = q0;
  chunk.nq = static_cast<uint32_t>(std::min(request.chunk_queries, request.n - q0));
  plan_schedule(request, chunk);
  merge_outputs(request, chunk, host_out ? scratch.h_out.as<std::uint8_t>() : nullptr);
  if (request.queries->device == UDF_HOST_DEVICE) {
    stage_host_queries(request, chunk, timed);
  } else {
    if (timed) scratch.stage[0].record(request.stream);
    stage_queries_and_coarse(request, chunk, nullptr, 0, chunk.nq, false);
  }
  if (request.share) request.share->exchange(scratch.probes.get(), chunk.probed);
  if (timed) scratch.stage[1].record(request.stream);
  stage_schedule(request, chunk);
  // A direct schedule (nothing between the coarse and the scan stages)
  // wrote its statistics to the mapped staging itself: no copy, no event.
  const bool copy_header = request.blocking && !chunk.direct;
  if (copy_header) copy_header_aside(request, chunk);
  if (chunk.choice) scratch.scan_begin.record(request.stream);
  stage_scan(request, chunk);
  if (chunk.choice) scratch.scan_end.record(request.stream);
  if (request.blocking && host_out && !chunk.out_final && finish_uses_pool(request, chunk.nq))
    wake_pool_after_scan(request);
  if (timed) scratch.stage[3].record(request.stream);
  stage_merge(request, chunk, host_out ? scratch.h_out.as<std::uint8_t>() : nullptr);
  if (!request.blocking) {
    if (chunk.choice)
      scratch.pending_choice = {chunk.choice, chunk.choice_scan, double(chunk.nq) * request.n_probes};
    return;
  }
  if (timed) scratch.stage[4].record(request.stream);
  finish_blocking_chunk(request, chunk, timed, copy_header, host_out);
}

// Runs every chunk of a request.
void run(Request& request) {
  udf_index* ix = request.ix;
  auto& scratch = ix->scratch;
  const bool host_queries = request.queries->device == UDF_HOST_DEVICE;
  const bool host_out =
      !request.direct_out && (request.out_d->device == UDF_HOST_DEVICE || request.out_i->device == UDF_HOST_DEVICE);
  const double t_start = now_ms();
  read_pending_choice(ix);
  if (request.blocking) ix->stats = udf_search_stats{};
  scratch.done_reached = false;  // until this search's end (an error leaves it false)
  prepare_staging(request, host_queries, host_out);
  // Stage times only when asked for (udf_index_set_stage_timing): the events cost a small search time.
  const bool timed = request.blocking && ix->stage_timing;
  for (int64_t q0 = 0; q0 < request.n; q0 += request.chunk_queries) run_chunk(request, q0, timed, host_out);
  if (!request.blocking) scratch.done.record(request.stream);
  scratch.done_reached = request.blocking;  // the last chunk's wait covered it (and `done`, older, is complete)
  if (request.blocking) ix->stats.total_ms = now_ms() - t_start;
}

}  // namespace

void search_index(udf_index* ix, const SearchCall& call) {
  Request request = make_request(ix, call);
  run(request);
}

}  // namespace udf::rt
