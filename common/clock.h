/* clock — monotonic and wall time in one place. */
#ifndef DDP_CLOCK_H
#define DDP_CLOCK_H
#include <stdint.h>
int64_t clock_mono_ms(void);   /* monotonic milliseconds */
double clock_mono_s(void);     /* monotonic seconds, sub-ms resolution */
double clock_wall_s(void);     /* seconds since the epoch */
double clock_cpu_s(void);      /* CPU seconds of the whole process, all threads */
#endif
