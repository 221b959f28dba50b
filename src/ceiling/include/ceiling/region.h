/*
 * ceiling/region.h - name a part of your program on `ceiling trace`'s timeline.
 *
 *     #include <ceiling/region.h>
 *     ceiling_region_begin("checkpoint");
 *     write_checkpoint();
 *     ceiling_region_end("checkpoint");
 *
 * Each begin/end pair becomes a slice named "checkpoint" on the calling
 * thread's track under `ceiling trace` (regions nest); under `ceiling
 * profile` each region's pairs and time are counted per process (and
 * `ceiling scale --profile` models each region's time over the counts).
 * End regions before MPI_Finalize: an MPI program's record is written there. The functions live in ceiling's interposer
 * (libceiling_interpose.so), which `ceiling trace` preloads; this header
 * refers to them weakly, so a program built with it links and runs without
 * ceiling, where each call is one test of a null address and nothing else.
 * No library to link. C and C++ alike.
 *
 *     ceiling_work(2.0 * n, 24.0 * n);   // flops done, bytes moved to and from memory
 *
 * states the work the program did, so that `ceiling profile` (and `ceiling
 * scale --profile`, per point) places it on this node's roofline: its
 * operational intensity (flops / bytes) and flop rate over its run time.
 * Call it as often as suits (once at the end, or per step): the interposer
 * sums the calls of every thread, and ceiling sums the processes and MPI
 * ranks. State the work before MPI_Finalize (the record is written there).
 * A negative, infinite or NaN value is counted as refused, not added.
 */
#ifndef CEILING_REGION_H
#define CEILING_REGION_H

#ifdef __cplusplus
extern "C" {
#endif

void ceiling_region_begin(const char *name) __attribute__((weak));
void ceiling_region_end(const char *name) __attribute__((weak));
void ceiling_work(double flops, double bytes) __attribute__((weak));

#ifdef __cplusplus
}
#endif

/* The name is not expanded again inside its own macro, so these call the functions when present. */
#define ceiling_region_begin(name) (ceiling_region_begin ? ceiling_region_begin(name) : (void)0)
#define ceiling_region_end(name) (ceiling_region_end ? ceiling_region_end(name) : (void)0)
#define ceiling_work(flops, bytes) (ceiling_work ? ceiling_work((flops), (bytes)) : (void)0)

#endif /* CEILING_REGION_H */
