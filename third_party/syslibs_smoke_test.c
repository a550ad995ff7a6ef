/* Smoke test of //third_party: Criterion runs it, Concurrency Kit and
 * liburcu link and work, in the config's architecture. */
#define _GNU_SOURCE
#include <ck_pr.h>
#include <ck_stack.h>
#include <criterion/criterion.h>
#include <urcu.h>
#include <urcu/lfstack.h>

struct item {
    ck_stack_entry_t ck_link;
    struct cds_lfs_node urcu_link;
    int value;
};

CK_STACK_CONTAINER(struct item, ck_link, item_from_ck)

Test(syslibs, ck_atomics_and_stack)
{
    unsigned int counter = 0;
    ck_pr_inc_uint(&counter);
    ck_pr_add_uint(&counter, 41);
    cr_assert_eq(ck_pr_load_uint(&counter), 42);

    /* ck_stack_t must be 16-byte aligned for the _mpmc ops on aarch64. */
    static ck_stack_t stack __attribute__((aligned(16))) = CK_STACK_INITIALIZER;
    struct item a = { .value = 1 }, b = { .value = 2 };
    ck_stack_push_mpmc(&stack, &a.ck_link);
    ck_stack_push_mpmc(&stack, &b.ck_link);
#ifdef CK_F_STACK_POP_MPMC
    /* Absent under --config=tsan: CK_USE_CC_BUILTINS has no double CAS. */
    cr_assert_eq(item_from_ck(ck_stack_pop_mpmc(&stack))->value, 2);
    cr_assert_eq(item_from_ck(ck_stack_pop_mpmc(&stack))->value, 1);
    cr_assert_null(ck_stack_pop_mpmc(&stack));
#else
    cr_assert_eq(item_from_ck(ck_stack_pop_upmc(&stack))->value, 2);
    cr_assert_eq(item_from_ck(ck_stack_pop_upmc(&stack))->value, 1);
    cr_assert_null(ck_stack_pop_upmc(&stack));
#endif
}

Test(syslibs, urcu_lfstack)
{
    rcu_register_thread();
    struct cds_lfs_stack stack;
    cds_lfs_init(&stack);
    struct item a = { .value = 7 };
    cds_lfs_node_init(&a.urcu_link);
    cds_lfs_push(&stack, &a.urcu_link);
    rcu_read_lock();
    struct cds_lfs_node *n = cds_lfs_pop_blocking(&stack);
    rcu_read_unlock();
    cr_assert_eq(caa_container_of(n, struct item, urcu_link)->value, 7);
    synchronize_rcu();
    rcu_unregister_thread();
    cds_lfs_destroy(&stack);
}

Test(syslibs, word_size)
{
    cr_assert_eq(sizeof(void *), 8);
}
