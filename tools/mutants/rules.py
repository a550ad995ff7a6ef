"""Named mutants: bugs the farm must catch, each a rewrite of the sources.

A rule is a list of edits.  An edit names a snippet of the library's code
and the text that replaces it.  The snippet is searched in every C source
and header under deliqueue/ and arch/ (not by path: the code moves between
files), token by token with any whitespace or none between tokens; it
must match exactly once, or the rule is
reported as broken (no match: the code it targets changed; more than one:
the snippet needs more context).  `token` is the original text the site
column of the results shows.
"""

from collections import namedtuple

Edit = namedtuple("Edit", "find replace token")
Rule = namedtuple("Rule", "name what edits")


def E(find, replace, token):
    return Edit(find, replace, token)


RULES = [
    Rule("TOP_RELAXED", "the looper reads the stack top without acquire", [
        E("return atomic_load_explicit(&q->top, memory_order_acquire);\n}",
          "return atomic_load_explicit(&q->top, memory_order_relaxed);\n}",
          "memory_order_acquire"),
    ]),
    Rule("DELIVER_NO_CAS", "delivery stores DELIVERED instead of winning a CAS against removers", [
        E("""won = dq_state_life(s) == DQ_PENDING &&
          atomic_compare_exchange_strong_explicit(
              &n->state, &s, dq_state_with_life(s, DQ_DELIVERED),
              memory_order_relaxed, memory_order_relaxed);""",
          "atomic_store_explicit(&n->state, dq_state_with_life(s, DQ_DELIVERED),"
          " memory_order_relaxed); won = true;",
          "atomic_compare_exchange_strong_explicit"),
    ]),
    Rule("SIFT_OFF_BY_ONE", "the heap's sift-down stops one slot short and never compares the last element", [
        E("#define DQ_HEAP_SIFT_LIMIT(end, unit) (end)",
          "#define DQ_HEAP_SIFT_LIMIT(end, unit) ((end) - (unit))", "(end)"),
    ]),
    Rule("CMP_SUB_OVERFLOW", "the key comparison subtracts the times, which overflows for front keys (INT64_MIN)", [
        E("return dq_sign_cmp(a.when, b.when) * 2 + dq_sign_cmp(a.seq, b.seq);",
          "int64_t d = a.when - b.when;"
          " return ((d > 0) - (d < 0)) * 2 + dq_sign_cmp(a.seq, b.seq);",
          "dq_sign_cmp(a.when, b.when)"),
        # the comparator and the heap's pick must go through dq_key_cmp too
        E("""static inline bool dq_key_less(dq_key a, dq_key b)
{
#if defined(__aarch64__) && defined(__GNUC__)""",
          """static inline bool dq_key_less(dq_key a, dq_key b)
{
#if 1
    return dq_key_cmp(a, b) < 0;
#elif defined(__aarch64__) && defined(__GNUC__)""", "dq_key_less"),
        E("""#if !(defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)))
    /* portable */""",
          """#if 1
    /* portable */""", "dq_heap_pick_smaller"),
    ]),
    Rule("PICK_LARGER", "the heap's sift-down follows the larger child (the pick's condition inverted)", [
        E("""#if !(defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)))
    /* portable */""",
          """#if 1
    return dq_key_less(*r, *l) ? c : right;
#elif !(defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)))
    /* portable */""", "dq_heap_pick_smaller"),
    ]),
    Rule("RUN_UNSORTED", "the heap's due run appends every due key, even one that sorts before the run's last", [
        E("#define DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) ((last) == NULL || !LESS(k, (last)->key))",
          "#define DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) ((void)(last), true)",
          "DQ_HEAP_RUN_SORTS_AFTER"),
    ]),
    Rule("FREELIST_NO_UNLINK", "removed nodes are recycled while still linked in the stack", [
        E("""looper_heap_remove(core, n);
    if (!(n->looper_flags & DQ_LOOPER_UNLINKED))
        looper_unlink(q, core, n);
    looper_retire(core, n);""",
          """looper_heap_remove(core, n);
    looper_retire(core, n);""", "looper_unlink"),
    ]),
    Rule("REFCOUNT_EARLY_DEC", "a canceller leaves the user count before it pushes onto the removal list", [
        E("""} else {
        if (!barrier)
            dq_report_discard(q, n);
        if (!barrier && dq_trace_on())
            dq_trace_cancel(q, n->msg.what);
        dq_push_removals(core, n, n);
        if (barrier)
            dq_wake_consumer(q); /* held sync messages may now be due */
    }""",
          """} else {
        core_leave(q, counted);
        if (!barrier)
            dq_report_discard(q, n);
        if (!barrier && dq_trace_on())
            dq_trace_cancel(q, n->msg.what);
        dq_push_removals(core, n, n);
        if (barrier)
            dq_wake_consumer(q);
        return 0;
    }""", "push_removal"),
    ]),
    Rule("UNLINK_NEEDS_HEAP_ROOM", "without heap room an unlink leaves the node linked, and it is retired anyway", [
        E("""if (looper_sweep(q, core) != 0) {
                    looper_unlink_below_new(q, core, n, next);
                    return;
                }""",
          """(void)looper_sweep(q, core);
                if (n->prev == NULL)
                    return;""", "looper_unlink_below_new"),
    ]),
    Rule("LOOPER_WALK_SKIPS_UNSWEPT", "dq_remove/dq_has on the consumer's thread scan only the heaps, not the unswept posts", [
        E("""for (dq_node *n = dq_walk_first(w->q); n != core->boundary; n = dq_walk_next(n))
        if (dq_match_walk_hit(&match, n, &s) && dq_match_walk_take(w, n, s))
            return;""", "", "dq_walk_first"),
    ]),
    Rule("LOOPER_WALK_ANY_THREAD", "every thread, not only the consumer's, scans the looper's heaps", [
        E("""bool dq_looper_is_self(dq_queue *q)
{""", """bool dq_looper_is_self(dq_queue *q)
{
    return q != NULL;""", "dq_looper_is_self"),
    ]),
    Rule("FREE_MAP_RELAXED", "the pool's give-back and take of a free-map word are relaxed instead of release/acquire", [
        E("atomic_fetch_or_explicit(free_word(w), mask, memory_order_release);",
          "atomic_fetch_or_explicit(free_word(w), mask, memory_order_relaxed);",
          "memory_order_release"),
        E("return atomic_exchange_explicit(p, 0, memory_order_acquire);",
          "return atomic_exchange_explicit(p, 0, memory_order_relaxed);",
          "memory_order_acquire"),
    ]),
    Rule("TAKE_NOT_ATOMIC", "a taker loads a free-map word and stores 0 instead of exchanging it", [
        E("return atomic_exchange_explicit(p, 0, memory_order_acquire);",
          "uint64_t mask = atomic_load_explicit(p, memory_order_acquire);"
          " atomic_store_explicit(p, 0, memory_order_relaxed); return mask;",
          "atomic_exchange_explicit"),
    ]),
    Rule("MAG_SPLIT_KEEPS_BITS", "a magazine fill that stops inside a word leaves the word's whole mask in the stash", [
        E("""DQ_TLS(dq_pool_cache).stash_mask[i] = mask;
        if (mask == 0)
            i++;""",
          """if (mask == 0)
            DQ_TLS(dq_pool_cache).stash_mask[i] = 0;
        if (mask == 0)
            i++;""", "stash_mask[i] = mask"),
    ]),
    Rule("CONSUMER_IGNORES_QUIT", "the consumer's own uncounted cancel skips the quit check", [
        E("""return (atomic_load_explicit(&q->users, memory_order_relaxed) & DQ_USERS_QUIT)
                   ? -ENOENT
                   : 0;""", "return 0;", "DQ_USERS_QUIT"),
    ]),
    Rule("BARRIER_SKIPS_WAKE", "no sync post wakes a consumer held by a barrier, though one that sorts before it is due", [
        E("""if ((s & DQ_HELD) && !async &&
        due >= atomic_load_explicit(&q->held_due, memory_order_relaxed))
        return 0;""",
          """if ((s & DQ_HELD) && !async)
        return 0;""", "held_due"),
    ]),
    Rule("DRAIN_REFUSES_REMOVAL", "quit_safely shuts removers out at once, as if the drain had ended", [
        E("""raise_quit_mode(q, DQ_QUIT_SAFELY);
    dq_wake_consumer(q);""",
          """raise_quit_mode(q, DQ_QUIT_SAFELY);
    atomic_fetch_or_explicit(&q->users, DQ_USERS_QUIT, memory_order_acq_rel);
    dq_wake_consumer(q);""", "raise_quit_mode(q, DQ_QUIT_SAFELY)"),
    ]),
    Rule("FD_NO_REBUILD", "the epoll set is never rebuilt: a closed fd whose dup keeps its file open lingers in it", [
        E("""{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = DQ_FD_WAKE_EVENTS,
                              .data = { .u64 = DQ_FD_WAKE_DATA } };""",
          """{
    fs->rebuild_wanted = false;
    return;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = DQ_FD_WAKE_EVENTS,
                              .data = { .u64 = DQ_FD_WAKE_DATA } };""",
          "epoll_create1"),
    ]),
    Rule("FD_NEVER_POLLED_BUSY", "a consumer with a message due never polls its fds: a ready fd waits behind later messages", [
        E("""    if (due > fs->polled_at ||
        (fs->delivered_since_poll > 0 && now - fs->polled_at >= DQ_FD_POLL_INTERVAL_NS))
        return looper_fd_poll_at(q, fs, now);""",
          """    if (false)
        return looper_fd_poll_at(q, fs, now);""", "due > fs->polled_at"),
    ]),
    Rule("FD_ADD_NO_RECHECK", "the consumer does not re-read fd_changed after storing its sleep word: an add from another thread is lost", [
        E("""atomic_load_explicit(&core->removals, mo) != NULL ||
           atomic_load_explicit(&q->fd_changed, mo) != 0;""",
          """atomic_load_explicit(&core->removals, mo) != NULL;""", "fd_changed"),
    ]),
    Rule("FD_WAKE_WRONG_WAIT", "a waker signals the futex while the consumer sleeps in epoll (or is parked under a host loop)", [
        E("""if (fs == NULL || !atomic_load_explicit(&fs->epoll_sleep, memory_order_relaxed))
        return false;""",
          """if (fs != NULL)
        return false;""", "epoll_sleep"),
    ]),
    Rule("RETIRED_NEVER_RETURNED", "a retired node never goes back to the pool", [
        E("dq_pool_batch_add(&core->recycled, n);", "(void)n;",
          "dq_pool_batch_add"),
    ]),
]
