/* Standalone driver for dq_fuzz_test outside --config=fuzz: runs
 * LLVMFuzzerTestOneInput once on the empty input and once on every file
 * named on the command line (directories are walked one level), so a
 * fuzzer's corpus is a regression suite in every config. Exit status: 0, or
 * whatever crash the input causes (the config's sanitizer reports it). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    /* An exact-size copy, so ASan sees reads past the end of the input. */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int replay_path(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        ++*count;
        return replay_file(path);
    }
    DIR *dir = opendir(path);
    if (dir == NULL) {
        perror(path);
        return -1;
    }
    int rc = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        size_t need = strlen(path) + strlen(entry->d_name) + 2;
        char *child = malloc(need);
        if (child == NULL) {
            rc = -1;
            break;
        }
        snprintf(child, need, "%s/%s", path, entry->d_name);
        if (stat(child, &st) == 0 && !S_ISDIR(st.st_mode)) {
            ++*count;
            if (replay_file(child) != 0)
                rc = -1;
        }
        free(child);
    }
    closedir(dir);
    return rc;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    int count = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (replay_path(argv[i], &count) != 0)
            rc = 1;
    }
    printf("fuzz_replay: %d input(s) replayed%s\n", count,
           rc ? ", with I/O errors" : "");
    return rc;
}
