/* A deliberate data race: two threads write `shared_counter` with no
 * synchronisation. Under --config=tsan ThreadSanitizer must report it;
 * race_canary_test fails if it does not (the config stopped instrumenting). */
#include <pthread.h>
#include <stdio.h>

static int shared_counter; /* plain int, written by two threads: the bug */

static void *racer(void *arg)
{
    for (int i = 0; i < 1000; i++)
        shared_counter++;
    return arg;
}

int main(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, racer, NULL) != 0)
        return 2;
    for (int i = 0; i < 1000; i++)
        shared_counter++;
    pthread_join(thread, NULL);
    printf("race_canary: counter=%d (no report means TSan is off)\n", shared_counter);
    return 0;
}
