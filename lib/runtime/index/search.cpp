// The search's driver: every chunk of a request through the stages, the
// statistics of a blocking search, and the scan choice's measurements.
#include <algorithm>

#include "cuda/event.h"
#include "cuda/launch.h"
#include "index/search_request.h"

namespace udf::rt {

namespace {

// AWAKE: a CUDA host function (no CUDA calls in it) that keeps the host
// pool's workers spinning for the next millisecond.
void CUDA_CB wake_host_pool(void* pool) { static_cast<HostPool*>(pool)->keep_awake(std::chrono::milliseconds(1)); }

// SCAN CHOICE for asynchronous searches: the scan time an earlier one
// measured, once the GPU has passed its end (cuEventQuery: no wait).
void read_pending_choice(udf_index* ix) {
  auto& pc = ix->s.pending_choice;
  if (!pc.choice) return;
  const CUresult q = cuda().cuEventQuery(ix->s.scan_end.get());
  if (q == CUDA_ERROR_NOT_READY) return;
  cu_check(q, "cuEventQuery");
  pc.choice->record(pc.scan, elapsed(ix->s.scan_begin, ix->s.scan_end), pc.pairs);
  pc = {};
}

// Runs every chunk of a checked request.
void run(Request& r) {
  udf_index* ix = r.ix;
  auto& s = ix->s;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  const bool host_q = r.queries->device == UDF_HOST_DEVICE;
  const bool host_out = !r.direct_out && (r.out_d->device == UDF_HOST_DEVICE || r.out_i->device == UDF_HOST_DEVICE);
  const double t_start = now_ms();
  read_pending_choice(ix);
  if (r.blocking) ix->stats = udf_search_stats{};
  s.done_reached = false;  // until this search's end (an error leaves it false)
  // Pinned staging: a blocking call waits for each chunk, so one chunk's
  // worth is reused; an asynchronous one stages all of its host queries.
  if (host_q) {
    s.staged.sync();  // an earlier call's copy out of it has finished
    s.h_in.ensure((r.blocking ? size_t(r.chunk) : size_t(r.n)) * row_bytes, "staged queries");
  }
  if (host_out) {
    s.h_out.ensure(staged_result_bytes(size_t(r.chunk), r.k), "staged results");
  }
  // The statistics come down from the schedule: its header, or a direct
  // schedule's four words a query.
  const size_t header_bytes = std::max<size_t>(UDF_IVF_SCHED_V1_HEADER_WORDS, 4 * size_t(r.chunk)) * 4;
  if (r.blocking) {
    s.h_header.ensure(header_bytes, "schedule header");
    ix->work = udf_search_work{};
  }
  // Stage times only when asked for (udf_index_set_stage_timing): the five
  // events cost a batch-1 search 5-7 us (H100, 1M x 128, P32).
  const bool timed = r.blocking && ix->stage_timing;
  for (int64_t q0 = 0; q0 < r.n; q0 += r.chunk) {
    Chunk c;
    c.q0 = q0;
    c.nq = static_cast<uint32_t>(std::min(r.chunk, r.n - q0));
    plan_schedule(r, c);
    merge_outputs(r, c, host_out ? s.h_out.as<std::uint8_t>() : nullptr);
    if (host_q) {
      // Host queries through pinned staging.  A few MB go in slices of about
      // 1 MB, copied on the runtime's host pool: the copy engine and the
      // coarse probe take each slice while the host copies the next (batch
      // 10k x 128 f32 on the H100 machine: 5 MB copied in 0.2 ms, the first
      // MB ready after 0.1 ms; each MB's upload 0.04 ms, its coarse kernels
      // 0.07 ms).  A first slice of 128 KB, for the GPU to start sooner, was
      // no faster.
      std::uint8_t* dst = s.h_in.as<std::uint8_t>() + (r.blocking ? 0 : size_t(q0) * row_bytes);
      constexpr size_t kSliceBytes = size_t(1) << 20;
      const bool sliced = c.nq * row_bytes >= 2 * kSliceBytes;
      auto ready = [&](int64_t s0, int64_t n) {
        if (s0 == 0 && timed) s.stage[0].record(r.stream);
        stage_queries_and_coarse(r, c, dst + s0 * row_bytes, static_cast<uint32_t>(s0), static_cast<uint32_t>(n), sliced);
      };
      if (sliced) {
        host_rows_in_slices(r.rt, r.queries, r.qstride, q0, c.nq, dst, std::max<int64_t>(1, kSliceBytes / row_bytes), ready);
      } else {
        rows_to_host(r.rt, r.queries, r.qstride, q0, c.nq, dst);
        ready(0, c.nq);
      }
      // The next call waits for this before it writes the staging again; a
      // blocking search has waited for its copies when it returns.
      if (!r.blocking) s.staged.record(r.stream);
    } else {
      if (timed) s.stage[0].record(r.stream);
      stage_queries_and_coarse(r, c, nullptr, 0, c.nq, false);
    }
    if (timed) s.stage[1].record(r.stream);
    stage_schedule(r, c);
    // The schedule's header (for the statistics) comes down on the side
    // stream, so the scan does not wait for the copy.  A direct schedule
    // (nothing between the coarse and the scan stages) wrote its statistics
    // to the mapped staging itself (plan_schedule): no copy, no event.
    const bool copy_header = r.blocking && !c.direct;
    if (copy_header) {
      s.stage[2].record(r.stream);
      CU(cuStreamWaitEvent, r.rt->aux_stream, s.stage[2].get(), 0);
      CU(cuMemcpyDtoHAsync, s.h_header.as<void>(), reinterpret_cast<CUdeviceptr>(c.sched.header),
         UDF_IVF_SCHED_V1_HEADER_WORDS * 4, r.rt->aux_stream);
      s.header_copied.record(r.rt->aux_stream);
    }
    if (c.choice) s.scan_begin.record(r.stream);
    stage_scan(r, c);
    if (c.choice) s.scan_end.record(r.stream);
    // AWAKE (host_pool.h): results the host pool will copy out wake its
    // workers when the scan ends, so that they are spinning, not asleep,
    // when the copy comes (the merge and the copy down take about 0.1 ms;
    // batch 10k on the H100 machine: 0.03-0.04 ms a search).  A host
    // function on a stream of its own: it waits for nothing else.
    if (r.blocking && host_out && !c.out_final && finish_uses_pool(r, c.nq)) {
      s.scanned.record(r.stream);
      CU(cuStreamWaitEvent, r.rt->wake_stream, s.scanned.get(), 0);
      CU(cuLaunchHostFunc, r.rt->wake_stream, wake_host_pool, &host_pool(r.rt));
    }
    if (timed) s.stage[3].record(r.stream);
    stage_merge(r, c, host_out ? s.h_out.as<std::uint8_t>() : nullptr);
    if (!r.blocking) {
      if (c.choice) s.pending_choice = {c.choice, c.choice_scan, double(c.nq) * r.P};
      continue;
    }
    if (timed) s.stage[4].record(r.stream);
    // No `done` event: the wait below reaches the end of this search, and
    // done_reached (set below) spares the next search the wait on it; an
    // event record costs a batch-1 search about a microsecond.
    CU(cuStreamSynchronize, r.stream);
    read_pending_choice(ix);  // an earlier asynchronous search's, complete now
    if (copy_header) s.header_copied.sync();  // before the next chunk's schedule overwrites the header
    if (host_out) finish_chunk(r, c, s.h_out.as<std::uint8_t>());
    if (c.choice) c.choice->record(c.choice_scan, elapsed(s.scan_begin, s.scan_end), double(c.nq) * r.P);
    c.choice = nullptr;
    udf_search_stats& st = ix->stats;
    if (timed) {
      st.coarse_ms += elapsed(s.stage[0], s.stage[1]);
      if (copy_header) {
        st.schedule_ms += elapsed(s.stage[1], s.stage[2]);
        st.scan_ms += elapsed(s.stage[2], s.stage[3]);
      } else {
        st.scan_ms += elapsed(s.stage[1], s.stage[3]);
      }
      st.merge_ms += elapsed(s.stage[3], s.stage[4]);
    }
    st.chunks += 1;
    st.queries_per_item = c.qpi;
    const uint32_t* h = s.h_header.as<uint32_t>();
    uint64_t scored = 0, groups = 0;
    if (c.direct) {
      st.work_items += c.items_max;
      for (uint32_t q = 0; q < c.nq; ++q, h += 4) {
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
  if (!r.blocking) s.done.record(r.stream);
  s.done_reached = r.blocking;  // the last chunk's wait covered it (and `done`, older, is complete)
  if (r.blocking) ix->stats.total_ms = now_ms() - t_start;
}

}  // namespace

void search_index(udf_index* ix, const SearchCall& call) {
  Request r = make_request(ix, call);
  run(r);
}

}  // namespace udf::rt
