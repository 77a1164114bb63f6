/* A SCHED_FIFO thread that sleeps to every next millisecond and notes each
   wake-up later than 100 us: the same sampler as the bench's StallWatch.
   `sampler SECONDS FILE`, pinned with taskset. */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <sched.h>
static double ts(struct timespec t){return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){double dur=atof(v[1]);FILE*f=fopen(v[2],"w");
struct sched_param p={.sched_priority=1}; if(sched_setscheduler(0,SCHED_FIFO,&p))perror("fifo");
struct timespec next,now; clock_gettime(CLOCK_MONOTONIC,&next); double t0=ts(next);
while(1){next.tv_nsec+=1000000; if(next.tv_nsec>=1000000000){next.tv_nsec-=1000000000;next.tv_sec++;}
clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&next,NULL); clock_gettime(CLOCK_MONOTONIC,&now);
double late=ts(now)-ts(next); if(late>100e-6) fprintf(f,"%.9f %.9f\n",ts(next),ts(now));
if(ts(now)-t0>dur)break;}
fprintf(f,"# %.9f %.9f\n",t0,ts(now));fclose(f);}
