/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: 256 KiB through a pipe between a writer and a reader
 * listener, then EPIPE when the reader closes (Android's CTS
 * MessageQueueTest, testFileDescriptorCallbacks).
 */
#include <signal.h>

#include "fd_test_util.h"

/* ---- 256 KiB through a pipe, then EPIPE (CTS testFileDescriptorCallbacks) */

#define PIPE_BYTES (256 * 1024)

typedef struct transfer {
    int rfd, wfd;
    size_t written, read;
    uint8_t next_in;
    bool bad_data, reader_error, writer_unexpected;
    _Atomic int reader_done, writer_error;
} transfer;

static uint32_t writer_listener(int fd, uint32_t events, void *ctx)
{
    transfer *t = ctx;
    if (events & DQ_EVENT_ERROR) {
        atomic_store(&t->writer_error, 1);
        return 0;
    }
    if (!(events & DQ_EVENT_OUTPUT) || fd != t->wfd) {
        t->writer_unexpected = true;
        return 0;
    }
    uint8_t buf[4096];
    size_t n = sizeof(buf);
    if (n > PIPE_BYTES - t->written)
        n = PIPE_BYTES - t->written;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(t->written + i);
    ssize_t w = write(fd, buf, n);
    if (w > 0)
        t->written += (size_t)w;
    return t->written < PIPE_BYTES ? DQ_EVENT_OUTPUT : DQ_EVENT_ERROR;
}

static uint32_t reader_listener(int fd, uint32_t events, void *ctx)
{
    transfer *t = ctx;
    if (events & DQ_EVENT_ERROR) {
        t->reader_error = true;
        return 0;
    }
    uint8_t buf[4096];
    ssize_t r = read(fd, buf, sizeof(buf));
    for (ssize_t i = 0; i < r; i++)
        if (buf[i] != (uint8_t)(t->read + (size_t)i))
            t->bad_data = true;
    if (r > 0)
        t->read += (size_t)r;
    if (t->read < PIPE_BYTES)
        return DQ_EVENT_INPUT;
    atomic_store(&t->reader_done, 1);
    return 0;
}

Test(fd, pipe_256k_between_listeners_then_epipe)
{
    signal(SIGPIPE, SIG_IGN);
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    transfer t = { .rfd = p[0], .wfd = p[1] };
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, reader_listener, &t), 0);
    cr_assert_eq(dq_add_fd_listener(l.q, p[1], DQ_EVENT_OUTPUT, writer_listener, &t),
                 0);
    cr_assert(await_count(&t.reader_done, 1), "the reader saw %zu of %d bytes", t.read,
              PIPE_BYTES);
    sync_wait(&l);
    cr_assert_eq(t.read, PIPE_BYTES);
    cr_assert_eq(t.written, PIPE_BYTES);
    cr_assert(!t.bad_data, "bytes arrived out of order or changed");
    cr_assert(!t.reader_error);
    /* the reader unregistered itself; now it "crashes": the writer gets
       EPIPE as an error */
    close(p[0]);
    cr_assert(await_count(&t.writer_error, 1), "the writer saw no error");
    sync_wait(&l);
    cr_assert(!t.writer_unexpected);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), -ENOENT);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[1]), -ENOENT);
    looper_stop(&l);
    close(p[1]);
}
