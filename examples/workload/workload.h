/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The workload the host-loop examples run (examples/libuv, examples/glib):
 * PRODUCERS threads post MESSAGES messages each, and another thread writes
 * BYTES bytes into a pipe the queue watches (dq_add_fd_listener).  Once
 * every message and every byte has arrived on the consumer, the consumer
 * quits the queue, and the host loop stops when dq_try_next answers
 * -ESHUTDOWN.  The run passes iff every message arrived once, in order per
 * producer, and every byte in order.
 *
 * What differs between the examples is only how the host loop watches
 * the queue's backend fd and drains it with dq_try_next.
 */
#ifndef DELIQUEUE_EXAMPLES_WORKLOAD_H
#define DELIQUEUE_EXAMPLES_WORKLOAD_H

#include <pthread.h>

#include <deliqueue/deliqueue.h>

#define WORKLOAD_PRODUCERS 4

typedef struct workload {
    dq_queue *q;
    int pipe_fd[2];
    /* consumer only */
    int next_what[WORKLOAD_PRODUCERS]; /* per producer: the next what expected */
    long messages, bytes;
    int errors;
    /* the threads, and their arguments */
    pthread_t producers[WORKLOAD_PRODUCERS], writer;
    struct workload_producer {
        dq_queue *q;
        int id;
    } producer_args[WORKLOAD_PRODUCERS];
} workload;

/* Create the queue and the pipe, make the calling thread the consumer and
   watch the pipe.  Returns the queue's backend fd for the host loop to
   poll, or a negative errno (the message printed). */
int workload_open(workload *w);
/* Start the producers and the pipe writer (after the host loop watches). */
void workload_start(workload *w);
/* A message dq_try_next returned, on the consumer. */
void workload_on_message(workload *w, const dq_msg *m);
/* Join the threads, free everything, print a line naming the loop, and
   return the process's exit status: 0 iff the run passed. */
int workload_finish(workload *w, const char *loop_name);

#endif /* DELIQUEUE_EXAMPLES_WORKLOAD_H */
