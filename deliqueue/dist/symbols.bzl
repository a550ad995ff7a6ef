"""The functions libdeliqueue.so exports: exactly those deliqueue.h declares.

//deliqueue/dist:exports_test fails when this list and the header disagree,
so a new public function is added here in the same change as its
declaration.
"""

PUBLIC_SYMBOLS = [
    "dq_add_fd_listener",
    "dq_add_idle_handler",
    "dq_atomics",
    "dq_backend_fd",
    "dq_call",
    "dq_cancel",
    "dq_clock_advance",
    "dq_clock_create_manual",
    "dq_clock_destroy",
    "dq_clock_now",
    "dq_create",
    "dq_current",
    "dq_dump",
    "dq_fast_forward",
    "dq_has",
    "dq_invoke",
    "dq_is_blocked_on_barrier",
    "dq_is_consumer",
    "dq_is_idle",
    "dq_is_invoke",
    "dq_loop",
    "dq_loop_once",
    "dq_next",
    "dq_next_until",
    "dq_now",
    "dq_peek_when",
    "dq_pending",
    "dq_pool_stats",
    "dq_post",
    "dq_post_at",
    "dq_post_at_front",
    "dq_post_delayed",
    "dq_post_repeating",
    "dq_post_sync_barrier",
    "dq_queue_now",
    "dq_quit",
    "dq_quit_safely",
    "dq_ref",
    "dq_remove",
    "dq_remove_fd_listener",
    "dq_remove_idle_handler",
    "dq_remove_sync_barrier",
    "dq_run_until_idle",
    "dq_set_name",
    "dq_set_observer",
    "dq_trace_enable",
    "dq_trace_enabled",
    "dq_try_next",
    "dq_unref",
    "dq_version",
    "dq_wake",
]

# The ABI version: the soname's number and the symbol version node.
SOVERSION = "0"

def version_script(symbols):
    """A GNU ld version script that exports `symbols` and hides the rest."""
    return ["DELIQUEUE_%s {" % SOVERSION, "  global:"] + [
        "    %s;" % s
        for s in symbols
    ] + ["  local:", "    *;", "};"]
