/* Linked into every test built against Criterion (//third_party:criterion,
 * alwayslink): under `bazel test`, Criterion also writes its per-case
 * results as JUnit XML to $TEST_UNDECLARED_OUTPUTS_DIR/criterion.xml, which
 * Bazel keeps in the test's outputs.zip beside test.xml and test.log.
 *
 * Why here and not in the test environment: the path differs per test, and
 * --test_env takes no variables; CRITERION_OUTPUTS=xml:- (standard output)
 * would need none, but it silences Criterion's own log and the tests'
 * output, which the test log is for. Outside `bazel test` (no
 * TEST_UNDECLARED_OUTPUTS_DIR) nothing changes. The runner process writes
 * the XML at the end of the run (the worker processes Criterion re-executes
 * the binary for register it too, and write nothing); a file it cannot open
 * costs an error line in the log, never the test's exit status. */
#include <stdio.h>
#include <stdlib.h>

/* After <stdio.h>: it uses FILE without including it. */
#include <criterion/output.h>

/* Outlives the run: Criterion may keep the pointer rather than a copy. */
static char criterion_xml_path[4096];

__attribute__((constructor)) static void criterion_xml_output(void)
{
    const char *dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    if (dir == NULL || dir[0] == '\0')
        return;
    int n = snprintf(criterion_xml_path, sizeof criterion_xml_path, "%s/criterion.xml",
                     dir);
    if (n < 0 || (size_t)n >= sizeof criterion_xml_path)
        return;
    criterion_add_output("xml", criterion_xml_path);
}
