"""The models' test variants, one row a line (a .bzl file, so that the
formatter keeps each row on its line):

    (test name, model, kind, check.sh options, spin -D flags)
"""

VARIANTS = [
    # sleep_wake.pml: the sleep word, post / barrier removal / quit wakes
    ("sleep_wake_test", "sleep_wake", "pass", [], []),
    ("sleep_wake_live_test", "sleep_wake", "pass", ["--ltl", "live"], []),
    ("sleep_wake_tso_test", "sleep_wake", "pass", [], ["-DTSO"]),
    ("sleep_wake_held_skips_wake_test", "sleep_wake", "catch", [], ["-DMUTANT_HELD_SKIPS_WAKE"]),
    ("sleep_wake_held_skips_wake_live_test", "sleep_wake", "catch", ["--ltl", "live"], ["-DMUTANT_HELD_SKIPS_WAKE"]),
    ("sleep_wake_weak_push_test", "sleep_wake", "catch", [], ["-DTSO", "-DWEAK_PUSH"]),
    ("sleep_wake_weak_sleep_store_test", "sleep_wake", "catch", [], ["-DTSO", "-DWEAK_SLEEP_STORE"]),
    ("sleep_wake_weak_removal_push_test", "sleep_wake", "catch", [], ["-DTSO", "-DWEAK_REMOVAL_PUSH"]),
    ("sleep_wake_weak_quit_tag_test", "sleep_wake", "catch", [], ["-DTSO", "-DWEAK_QUIT_TAG"]),
    # manual_clock.pml: the sleep on a manual clock, dq_clock_advance's wakes
    ("manual_clock_test", "manual_clock", "pass", [], []),
    ("manual_clock_live_test", "manual_clock", "pass", ["--ltl", "live"], []),
    ("manual_clock_tso_test", "manual_clock", "pass", [], ["-DTSO"]),
    ("manual_clock_no_clock_recheck_test", "manual_clock", "catch", [], ["-DMUTANT_NO_CLOCK_RECHECK"]),
    ("manual_clock_no_clock_recheck_live_test", "manual_clock", "catch", ["--ltl", "live"], ["-DMUTANT_NO_CLOCK_RECHECK"]),
    ("manual_clock_advance_before_store_test", "manual_clock", "catch", [], ["-DMUTANT_ADVANCE_BEFORE_STORE"]),
    ("manual_clock_weak_clock_store_test", "manual_clock", "catch", [], ["-DTSO", "-DWEAK_CLOCK_STORE"]),
    ("manual_clock_weak_sleep_store_test", "manual_clock", "catch", [], ["-DTSO", "-DWEAK_SLEEP_STORE"]),
    # loop_wake.pml: dq_wake against wakeable waits (dq_loop_once, dq_next_until)
    ("loop_wake_test", "loop_wake", "pass", [], []),
    ("loop_wake_live_test", "loop_wake", "pass", ["--ltl", "live"], []),
    ("loop_wake_tso_test", "loop_wake", "pass", [], ["-DTSO"]),
    ("loop_wake_no_flag_recheck_test", "loop_wake", "catch", [], ["-DMUTANT_NO_FLAG_RECHECK"]),
    ("loop_wake_no_flag_recheck_live_test", "loop_wake", "catch", ["--ltl", "live"], ["-DMUTANT_NO_FLAG_RECHECK"]),
    ("loop_wake_take_not_atomic_test", "loop_wake", "catch", [], ["-DMUTANT_TAKE_NOT_ATOMIC"]),
    ("loop_wake_weak_wake_flag_test", "loop_wake", "catch", [], ["-DTSO", "-DWEAK_WAKE_FLAG"]),
    ("loop_wake_weak_sleep_store_test", "loop_wake", "catch", [], ["-DTSO", "-DWEAK_SLEEP_STORE"]),
    # fd_wake.pml: the epoll wait, the waker's choice of wait, adds of fd listeners
    ("fd_wake_test", "fd_wake", "pass", [], []),
    ("fd_wake_live_test", "fd_wake", "pass", ["--ltl", "live"], []),
    ("fd_wake_tso_test", "fd_wake", "pass", [], ["-DTSO"]),
    ("fd_wake_no_fd_recheck_test", "fd_wake", "catch", [], ["-DMUTANT_NO_FD_RECHECK"]),
    ("fd_wake_mark_after_word_test", "fd_wake", "catch", [], ["-DMUTANT_MARK_AFTER_WORD"]),
    ("fd_wake_no_eventfd_write_test", "fd_wake", "catch", [], ["-DMUTANT_NO_EVENTFD_WRITE"]),
    ("fd_wake_no_fd_recheck_live_test", "fd_wake", "catch", ["--ltl", "live"], ["-DMUTANT_NO_FD_RECHECK"]),
    ("fd_wake_weak_fd_changed_test", "fd_wake", "catch", [], ["-DTSO", "-DWEAK_FD_CHANGED"]),
    # drain.pml: dq_quit_safely's drain
    ("drain_test", "drain", "pass", [], []),
    ("drain_live_test", "drain", "pass", ["--ltl", "done"], []),
    ("drain_tso_test", "drain", "pass", [], ["-DTSO"]),
    ("drain_quit_time_before_tag_test", "drain", "catch", [], ["-DMUTANT_QUIT_TIME_BEFORE_TAG"]),
    ("drain_removal_refused_while_draining_test", "drain", "catch", [], ["-DMUTANT_REMOVAL_REFUSED_WHILE_DRAINING"]),
    ("drain_mode_before_trim_test", "drain", "catch", [], ["-DMUTANT_MODE_BEFORE_TRIM"]),
    ("drain_weak_mode_cas_test", "drain", "catch", [], ["-DTSO", "-DWEAK_MODE_CAS"]),
    ("drain_weak_await_store_test", "drain", "catch", [], ["-DTSO", "-DWEAK_AWAIT_STORE"]),
    # exactly_once.pml: delivery, cancel, remove, trim and teardown claims
    ("exactly_once_test", "exactly_once", "pass", [], []),
    ("exactly_once_live_test", "exactly_once", "pass", ["--ltl", "done"], []),
    ("exactly_once_deliver_no_cas_test", "exactly_once", "catch", [], ["-DMUTANT_DELIVER_NO_CAS"]),
    ("exactly_once_teardown_skips_drain_test", "exactly_once", "catch", [], ["-DMUTANT_TEARDOWN_SKIPS_DRAIN"]),
    # walker_epochs.pml: walkers' grace periods
    ("walker_epochs_test", "walker_epochs", "pass", [], []),
    ("walker_epochs_live_test", "walker_epochs", "pass", ["--ltl", "reclaimed", "--fair"], []),
    ("walker_epochs_tso_test", "walker_epochs", "pass", [], ["-DTSO"]),
    ("walker_epochs_tso_live_test", "walker_epochs", "pass", ["--ltl", "reclaimed", "--fair"], ["-DTSO"]),
    ("walker_epochs_advance_unchecked_test", "walker_epochs", "catch", [], ["-DMUTANT_ADVANCE_UNCHECKED"]),
    ("walker_epochs_tso_no_reload_test", "walker_epochs", "catch", [], ["-DTSO", "-DMUTANT_WALKER_NO_RELOAD"]),
    ("walker_epochs_weak_walker_inc_test", "walker_epochs", "catch", [], ["-DTSO", "-DWEAK_WALKER_INC"]),
    ("walker_epochs_weak_epoch_store_test", "walker_epochs", "catch", [], ["-DTSO", "-DWEAK_EPOCH_STORE"]),
    # pool.pml: a chunk's publication to the scans; the registry of thread caches
    ("pool_test", "pool", "pass", [], []),
    ("pool_words_before_chunk_test", "pool", "catch", [], ["-DMUTANT_WORDS_BEFORE_CHUNK"]),
    ("pool_exit_no_wait_test", "pool", "catch", [], ["-DMUTANT_EXIT_NO_WAIT"]),
    ("pool_reader_uncounted_test", "pool", "catch", [], ["-DMUTANT_READER_UNCOUNTED"]),
    # user_count.pml: the tagged user count and the teardown's wait
    ("user_count_test", "user_count", "pass", [], []),
    ("user_count_live_test", "user_count", "pass", ["--ltl", "freed_eventually", "--fair"], []),
    ("user_count_no_last_signal_test", "user_count", "catch", [], ["-DMUTANT_NO_LAST_SIGNAL"]),
    ("user_count_early_dec_test", "user_count", "catch", [], ["-DMUTANT_EARLY_DEC"]),
]
